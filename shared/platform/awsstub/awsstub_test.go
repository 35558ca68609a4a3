package awsstub_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsstub"
)

func TestAnswer(t *testing.T) {
	var got []any
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", APIOptions: []func(*middleware.Stack) error{awsstub.Answer(func(in any) (any, error) {
		got = append(got, in)
		if _, ok := in.(*dynamodb.DeleteItemInput); ok {
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("no")}
		}
		return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}}, nil
	})}})
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}

	get := &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key}
	out, err := db.GetItem(ctx, get)
	if err != nil || len(out.Item) != 1 {
		t.Errorf("GetItem = %+v, %v; want the stub's item", out, err)
	}
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Errorf("DeleteItem: %v, want the stub's ConditionalCheckFailedException", err)
	}
	// The SDK validates the request before the stub sees it.
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{}); err == nil {
		t.Error("GetItem without a table: no error")
	}
	if len(got) != 2 || got[0] != get {
		t.Errorf("the stub saw %d calls (%v), want the GetItem input itself, then the DeleteItem", len(got), got)
	}
}
