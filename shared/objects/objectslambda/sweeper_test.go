package objectslambda_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// putRaw writes bucket keys directly, in parallel: blobs no Put made.
func (e *env) putRaw(t *testing.T, keys []string) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(keys))
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := e.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(k), Body: bytes.NewReader([]byte("orphan " + k))})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSweepEmpty(t *testing.T) {
	e := newEnv(t)
	e.advance(grace + time.Minute)
	res := e.sweep(t)
	if res.Items != 0 || res.Listed != 0 || res.Swept != 0 || res.ChunksMarked != 0 {
		t.Errorf("empty store: %+v, want nothing scanned, listed or swept", res)
	}
	e.mustHold(t, true)
}

// An upload intent names its blob the way a version does: the sweeper
// keeps the upload while the intent lives, and sweeps it once the intent
// is gone and nothing committed it. Keys under no payload prefix are never
// touched.
func TestSweepKeepsUploadsWhileTheirIntentLives(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	upload := objects.BlobKey("docs/big", "u1")
	upload = "uploads/" + upload[len(objects.BlobPrefix):]
	e.putRaw(t, []string{upload, "elsewhere/keep-me"})
	intent := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "upload#u1"}, "sk": &types.AttributeValueMemberS{Value: "u"},
		"blob":      &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: upload}}},
		"expiresAt": &types.AttributeValueMemberN{Value: "4102444800"},
	}
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: intent}); err != nil {
		t.Fatal(err)
	}
	e.advance(3 * grace) // past the uploads' grace too
	if res := e.sweep(t); res.Swept != 0 || res.References != 1 {
		t.Fatalf("with the intent: swept %d, %d references; want 0 and 1", res.Swept, res.References)
	}
	if _, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.table), Key: map[string]types.AttributeValue{"pk": intent["pk"], "sk": intent["sk"]}}); err != nil {
		t.Fatal(err)
	}
	if res := e.sweep(t); res.Swept != 1 {
		t.Fatalf("without the intent: swept %d, want 1", res.Swept)
	}
	e.mustHold(t, true)
	if _, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.bucket), Key: aws.String("elsewhere/keep-me")}); err != nil {
		t.Errorf("a key outside the payload prefixes: %v", err)
	}
}

// Thousands of orphans among live documents, listed in pages: a sweep
// within the grace keeps them all, one past it deletes exactly the
// orphans and leaves every document readable.
func TestSweepThousands(t *testing.T) {
	orphans, docs := 3000, 40
	if testing.Short() {
		orphans = 300
	}
	e := newEnv(t)
	e.lst.PageSize = 500
	e.refs.PageSize = 25
	ctx := context.Background()
	keys := make([]string, orphans)
	for i := range keys {
		keys[i] = objects.BlobKey(fmt.Sprintf("docs/%d", i%100), fmt.Sprintf("orphan%05d", i))
	}
	start := time.Now()
	e.putRaw(t, keys)
	t.Logf("%d orphan blobs written in %s", orphans, time.Since(start).Round(time.Millisecond))
	bodies := map[string][]byte{}
	for i := range docs {
		k := fmt.Sprintf("docs/live/%d", i)
		bodies[k] = bytes.Repeat([]byte{byte(i)}, 12<<10)
		if _, err := e.store.Put(ctx, k, bodies[k], objects.PutOptions{NoCompress: true}); err != nil {
			t.Fatal(err)
		}
	}
	if res := e.sweep(t); res.Swept != 0 || res.Listed != orphans+docs {
		t.Fatalf("within the grace: listed %d, swept %d; want %d listed, none swept", res.Listed, res.Swept, orphans+docs)
	}
	e.advance(grace + time.Minute)
	res := e.sweep(t)
	t.Logf("sweep: %d items scanned, %d versions listed, %d swept (%d bytes) in %s", res.Items, res.Listed, res.Swept, res.SweptBytes, res.Took.Round(time.Millisecond))
	if res.Swept != orphans || res.References != docs {
		t.Fatalf("swept %d with %d references, want %d with %d", res.Swept, res.References, orphans, docs)
	}
	e.mustHold(t, true)
	for k, want := range bodies {
		got, err := e.store.Get(ctx, k, 0)
		if err != nil || !bytes.Equal(got.Body, want) {
			t.Fatalf("%s after the sweep: %v", k, err)
		}
	}
}
