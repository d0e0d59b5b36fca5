// Step 4 of the scenario: a client of its own whose connection string asks
// for one compressor, inserting and reading back 20 compressible documents.
package main

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func compressed(ctx context.Context, dbName, name, uri string) (bson.M, error) {
	client, err := connect(uri)
	if err != nil {
		return nil, err
	}
	defer client.Disconnect(ctx)
	coll := client.Database(dbName).Collection("compressed_" + name)
	docs := make([]any, 20)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "text", Value: fmt.Sprintf("row %d %s", i, strings.Repeat("compressible ", 20))}}
	}
	inserted, err := coll.InsertMany(ctx, docs)
	if err != nil {
		return nil, err
	}
	found, err := findAll(ctx, coll, bson.D{}, id(1))
	if err != nil {
		return nil, err
	}
	return bson.M{"inserted": len(inserted.InsertedIDs), "found": found}, nil
}
