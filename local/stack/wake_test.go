package stack_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// A write through the stack's DynamoDB proxy wakes the readers of its
// table's stream: with quiet shards waiting an hour between reads, the
// objects table's reaper still gets the write's record.
func TestAWriteWakesItsStreamsReaders(t *testing.T) {
	ctx := context.Background()
	env := upBare(t, "wake", func(o *stack.Options) { o.IdlePollInterval = time.Hour })
	if err := env.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const fn = "ObjectsReaperFunction"
	stats := func() runner.Stats {
		for _, s := range env.Runner.Stats() {
			if s.Function == fn {
				return s
			}
		}
		t.Fatalf("no %s in the runner", fn)
		return runner.Stats{}
	}
	// The objects stream has one shard (StreamShards 0): once it is in its
	// idle wait, only a wake reads it within the hour.
	deadline := time.Now().Add(time.Minute)
	for stats().IdleShards == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s's shard never went idle: %+v", fn, stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := stats()
	db := dynamodb.NewFromConfig(env.AWS) // through the stack's proxy
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Vars["OBJECTS_TABLE_NAME"]), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "woken"}, "sk": &types.AttributeValueMemberS{Value: "v0"},
	}}); err != nil {
		t.Fatal(err)
	}
	for s := stats(); s.Records+s.Filtered == before.Records+before.Filtered; s = stats() {
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("the write's record never reached %s: %+v", fn, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
