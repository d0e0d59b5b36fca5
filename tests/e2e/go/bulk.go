// Step 3 of the scenario: an ordered and an unordered bulk write mixing
// inserts, updates, a replacement, an upsert and deletes.
package main

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func id(v int) bson.D { return bson.D{{Key: "_id", Value: v}} }

func bulkWrite(ctx context.Context, coll *mongo.Collection, models []mongo.WriteModel, ordered bool) (bson.M, error) {
	result, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(ordered))
	writeErrors := bson.A{}
	if err != nil {
		var bulkErr mongo.BulkWriteException
		if !errors.As(err, &bulkErr) || result == nil {
			return nil, err
		}
		for _, e := range bulkErr.WriteErrors {
			writeErrors = append(writeErrors, bson.M{"index": e.Index, "code": e.Code})
		}
	}
	return bson.M{
		"inserted":    result.InsertedCount,
		"matched":     result.MatchedCount,
		"modified":    result.ModifiedCount,
		"deleted":     result.DeletedCount,
		"upserted":    result.UpsertedCount,
		"writeErrors": writeErrors,
	}, nil
}

func bulk(ctx context.Context, db *mongo.Database) (bson.M, error) {
	coll := db.Collection("bulk")
	ordered, err := bulkWrite(ctx, coll, []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}, {Key: "n", Value: 1}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "b"}, {Key: "n", Value: 2}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "c"}, {Key: "n", Value: 3}}),
		mongo.NewUpdateOneModel().SetFilter(id(1)).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}}),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 5}}}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "flag", Value: true}}}}),
		mongo.NewDeleteOneModel().SetFilter(id(3)),
		mongo.NewReplaceOneModel().SetFilter(id(2)).SetReplacement(bson.D{{Key: "k", Value: "B"}, {Key: "n", Value: 20}}),
		mongo.NewUpdateOneModel().SetFilter(id(4)).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: "d"}}}}).SetUpsert(true),
	}, true)
	if err != nil {
		return nil, err
	}
	unordered, err := bulkWrite(ctx, coll, []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "duplicate"}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 5}, {Key: "k", Value: "e"}, {Key: "n", Value: 5}}),
		mongo.NewUpdateOneModel().SetFilter(id(2)).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: true}}}}),
		mongo.NewDeleteOneModel().SetFilter(id(1)),
	}, false)
	if err != nil {
		return nil, err
	}
	final, err := findAll(ctx, coll, bson.D{}, id(1))
	if err != nil {
		return nil, err
	}
	return bson.M{"ordered": ordered, "unordered": unordered, "final": final}, nil
}
