// Step 1 of the scenario: insert, find, update and delete on a plain collection.
package main

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func findAll(ctx context.Context, coll *mongo.Collection, filter, sort bson.D) ([]bson.D, error) {
	found, err := coll.Find(ctx, filter, options.Find().SetSort(sort))
	if err != nil {
		return nil, err
	}
	docs := []bson.D{}
	return docs, found.All(ctx, &docs)
}

func crud(ctx context.Context, db *mongo.Database) (bson.M, error) {
	coll := db.Collection("crud")
	byID := bson.D{{Key: "_id", Value: 1}}
	one, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}, {Key: "tags", Value: bson.A{"x", "y"}}})
	if err != nil {
		return nil, err
	}
	many, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "b"}, {Key: "n", Value: 2}}, bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 3}}})
	if err != nil {
		return nil, err
	}
	foundGte2, err := findAll(ctx, coll, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 2}}}}, byID)
	if err != nil {
		return nil, err
	}
	u1, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}})
	if err != nil {
		return nil, err
	}
	um, err := coll.UpdateMany(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 5}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "small", Value: true}}}})
	if err != nil {
		return nil, err
	}
	d1, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: "b"}})
	if err != nil {
		return nil, err
	}
	final, err := findAll(ctx, coll, bson.D{}, byID)
	if err != nil {
		return nil, err
	}
	count, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	return bson.M{
		"insertOneId":     one.InsertedID,
		"insertManyCount": len(many.InsertedIDs),
		"foundGte2":       foundGte2,
		"updateOne":       bson.M{"matched": u1.MatchedCount, "modified": u1.ModifiedCount},
		"updateMany":      bson.M{"matched": um.MatchedCount, "modified": um.ModifiedCount},
		"deleteOne":       d1.DeletedCount,
		"final":           final,
		"count":           count,
	}, nil
}
