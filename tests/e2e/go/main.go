// Command scenario runs the driver-matrix scenario with the official Go
// driver (go.mongodb.org/mongo-driver/v2, pinned in go.mod).
//
//	scenario PLAN_JSON
//
// PLAN_JSON is {uri, db, compressed: {NAME: URI, ...}}; the steps, their
// collections and the JSON printed on stdout are specified once, in
// tests/e2e/python/test_driver_matrix.py, which runs this and judges what it
// prints. The output is canonical Extended JSON, so BSON types survive. A
// step that fails is reported, not fatal: the exit status is non-zero only
// if the program itself cannot run.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

type plan struct {
	URI        string            `json:"uri"`
	DB         string            `json:"db"`
	Compressed map[string]string `json:"compressed"`
}

func connect(uri string) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
}

func main() {
	var p plan
	if len(os.Args) != 2 || json.Unmarshal([]byte(os.Args[1]), &p) != nil || p.URI == "" || p.DB == "" || p.Compressed == nil {
		fmt.Fprintln(os.Stderr, `usage: scenario '{"uri": ..., "db": ..., "compressed": {...}}'`)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := connect(p.URI)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		os.Exit(1)
	}
	defer client.Disconnect(ctx)
	db := client.Database(p.DB)

	compression := bson.M{}
	names := make([]string, 0, len(p.Compressed))
	for name := range p.Compressed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		compression[name] = step(func() (bson.M, error) { return compressed(ctx, p.DB, name, p.Compressed[name]) })
	}
	out := bson.D{
		{Key: "crud", Value: step(func() (bson.M, error) { return crud(ctx, db) })},
		{Key: "cursor", Value: step(func() (bson.M, error) { return cursor(ctx, db) })},
		{Key: "bulk", Value: step(func() (bson.M, error) { return bulk(ctx, db) })},
		{Key: "compression", Value: compression},
		{Key: "bucket", Value: step(func() (bson.M, error) { return bucket(ctx, db) })},
		{Key: "refusal", Value: step(func() (bson.M, error) { return refusal(ctx, db) })},
	}
	text, err := bson.MarshalExtJSON(out, true, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		os.Exit(1)
	}
	fmt.Println(string(text))
}
