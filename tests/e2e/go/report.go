// How the scenario reports a step: {ok: true, ...its results} or {ok: false,
// error: {kind, code, codeName, message}} with the error as the driver hands
// it to the application.
package main

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func step(run func() (bson.M, error)) bson.M {
	result, err := run()
	if err != nil {
		return bson.M{"ok": false, "error": errorSeen(err)}
	}
	result["ok"] = true
	return result
}

func errorSeen(err error) bson.M {
	seen := bson.M{"kind": fmt.Sprintf("%T", err), "code": nil, "codeName": nil, "message": err.Error()}
	var command mongo.CommandError
	var write mongo.WriteException
	switch {
	case errors.As(err, &command):
		seen["code"], seen["codeName"] = command.Code, command.Name
	case errors.As(err, &write) && len(write.WriteErrors) == 1:
		seen["code"] = int32(write.WriteErrors[0].Code)
	}
	return seen
}
