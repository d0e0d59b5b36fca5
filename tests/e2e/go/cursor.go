// Step 2 of the scenario: 250 documents read back through one cursor in
// batches of 50, each batch's size recorded as the driver received it.
package main

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func cursor(ctx context.Context, db *mongo.Database) (bson.M, error) {
	coll := db.Collection("cursor")
	docs := make([]any, 250)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("p", 100)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		return nil, err
	}
	found, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(50))
	if err != nil {
		return nil, err
	}
	defer found.Close(ctx)
	ids, batches := bson.A{}, bson.A{}
	left := 0 // documents of the current batch not yet returned
	for found.Next(ctx) {
		if left == 0 {
			batches = append(batches, found.RemainingBatchLength()+1)
		}
		left = found.RemainingBatchLength()
		ids = append(ids, found.Current.Lookup("_id"))
	}
	if err := found.Err(); err != nil {
		return nil, err
	}
	return bson.M{"ids": ids, "batches": batches}, nil
}
