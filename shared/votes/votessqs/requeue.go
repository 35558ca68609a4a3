package votessqs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// VisibilityAPI is what Requeue needs from SQS; *sqs.Client satisfies it.
type VisibilityAPI interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Delayed is a received message to deliver again after Delay.
type Delayed struct {
	ReceiptHandle string
	Delay         time.Duration
}

// Requeue sets when messages given back (batch item failures) are
// delivered again, instead of the queue's visibility timeout.
type Requeue struct {
	client   VisibilityAPI
	queueURL string
}

// NewRequeue returns a Requeue for queueURL.
func NewRequeue(client VisibilityAPI, queueURL string) *Requeue {
	return &Requeue{client: client, queueURL: queueURL}
}

// Delay changes each message's visibility to its delay, ten at a time. A
// message it could not change keeps the queue's visibility timeout: it is
// delivered again later, never lost.
func (q *Requeue) Delay(ctx context.Context, msgs []Delayed) error {
	failed := 0
	var first error
	for start := 0; start < len(msgs); start += 10 {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for i, m := range msgs[start:min(start+10, len(msgs))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.ReceiptHandle),
				VisibilityTimeout: int32(m.Delay.Round(time.Second) / time.Second),
			})
		}
		out, err := q.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.queueURL), Entries: entries})
		if err != nil {
			failed += len(entries)
			first = cmpErr(first, err)
			continue
		}
		failed += len(out.Failed)
		if len(out.Failed) > 0 {
			first = cmpErr(first, fmt.Errorf("%s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message)))
		}
	}
	if failed > 0 {
		return fmt.Errorf("votessqs: %d of %d messages keep the queue's visibility timeout: %w", failed, len(msgs), first)
	}
	return nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
