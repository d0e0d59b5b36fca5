// Steps 5 and 6 of the scenario, on the collection the test's bucket rule
// covers: readings inserted one by one and read back, then an update the
// rule refuses, and the readings read again.
package main

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

var t0 = time.Date(2024, 3, 4, 0, 0, 0, 0, time.UTC)

func byTime() bson.D { return bson.D{{Key: "at", Value: 1}} }

func bucket(ctx context.Context, db *mongo.Database) (bson.M, error) {
	coll := db.Collection("readings")
	inserted := bson.A{}
	for i := 0; i < 12; i++ {
		at := bson.NewDateTimeFromTime(t0.Add(time.Duration(i) * 10 * time.Minute))
		doc := bson.D{{Key: "sensor", Value: []string{"s1", "s2"}[i%2]}, {Key: "at", Value: at}, {Key: "temp", Value: 20.25 + float64(i)}}
		result, err := coll.InsertOne(ctx, doc)
		if err != nil {
			return nil, err
		}
		inserted = append(inserted, append(bson.D{{Key: "_id", Value: result.InsertedID}}, doc...))
	}
	found, err := findAll(ctx, coll, bson.D{}, byTime())
	if err != nil {
		return nil, err
	}
	return bson.M{"inserted": inserted, "found": found}, nil
}

func refusal(ctx context.Context, db *mongo.Database) (bson.M, error) {
	coll := db.Collection("readings")
	attempt := step(func() (bson.M, error) {
		r, err := coll.UpdateOne(ctx, bson.D{{Key: "sensor", Value: "s1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "temp", Value: 99.5}}}})
		if err != nil {
			return nil, err
		}
		return bson.M{"matched": r.MatchedCount, "modified": r.ModifiedCount}, nil
	})
	after, err := findAll(ctx, coll, bson.D{}, byTime())
	if err != nil {
		return nil, err
	}
	return bson.M{"attempt": attempt, "after": after}, nil
}
