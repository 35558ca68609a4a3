package votessqs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// A message given back with a 1 s delay is delivered again after about a
// second, where the queue's own visibility timeout is a minute; a stale
// receipt handle is reported, the message kept.
func TestIntegrationRequeueDelaysRedelivery(t *testing.T) {
	client := sqsClient(t, localSQS(t), 3)
	ctx := t.Context()
	url := mustQueue(t, client, "requeue", 262144)
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
		Attributes: map[string]string{"VisibilityTimeout": "60"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("v1")}); err != nil {
		t.Fatal(err)
	}
	got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
	}
	given := time.Now()
	q := NewRequeue(client, url)
	if err := q.Delay(ctx, []Delayed{{ReceiptHandle: aws.ToString(got.Messages[0].ReceiptHandle), Delay: time.Second}}); err != nil {
		t.Fatalf("Delay: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		again, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Messages) == 1 {
			if waited := time.Since(given); waited < 900*time.Millisecond {
				t.Errorf("delivered again after %s, before its 1 s delay", waited)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not delivered again within 30 s of a 1 s delay (the queue's timeout is 60 s)")
		}
	}
	err = q.Delay(context.Background(), []Delayed{{ReceiptHandle: "not-a-receipt", Delay: time.Second}})
	if err == nil || !strings.Contains(err.Error(), "1 of 1 messages keep the queue's visibility timeout") {
		t.Errorf("Delay of a bad receipt handle: %v", err)
	}
}
