package archiveparquet_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// mustBucket creates a fresh bucket on the local S3 server (versitygw) and
// empties and removes it when the test ends.
func mustBucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	st := stacktest.Need(t)
	cfg := stacktest.Config(t, st, nil)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	name := fmt.Sprintf("archive-it-%d", time.Now().UnixNano())
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		files, _ := archiveparquet.ListFiles(ctx, client, name, "")
		for _, f := range files {
			_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String(f.Key)})
		}
		_, _ = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return client, name
}

func TestIntegrationArchiveToS3(t *testing.T) {
	client, name := mustBucket(t)
	ctx := t.Context()
	a := newArchiver(client, nil)
	a.Bucket = name
	batch := voteBatch(0, 250)
	prefix := archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}.Prefix()

	// The same batch twice (a retry after a timeout, or a redelivery): one object.
	for attempt := 1; attempt <= 2; attempt++ {
		resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: batch})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("attempt %d: Handle = %+v, %v", attempt, resp, err)
		}
	}
	files, err := archiveparquet.ListFiles(ctx, client, name, prefix)
	if err != nil {
		t.Fatal(err)
	}
	wantKey := prefix + "stream-2026-11-01T000000.000-" + archive.PadSequence(seq(0)) + ".parquet"
	if len(files) != 1 || files[0].Key != wantKey {
		t.Fatalf("objects after two deliveries: %+v, want one at %s", files, wantKey)
	}

	// Read back: the rows are the batch's rows, in order.
	got, err := archiveparquet.ReadRows(ctx, client, name, wantKey)
	if err != nil {
		t.Fatal(err)
	}
	var recs []archive.Record
	for _, r := range batch {
		rec, err := archiveparquet.FromLambda(r)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	objs, err := archive.Group(recs)
	if err != nil || len(objs) != 1 {
		t.Fatalf("Group = %d objects, %v", len(objs), err)
	}
	if !reflect.DeepEqual(got, objs[0].Rows) {
		t.Errorf("rows read back differ from the rows written (%d vs %d)", len(got), len(objs[0].Rows))
	}
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(name), Key: aws.String(wantKey)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(head.ContentType) != archiveparquet.ContentType || head.Metadata[archiveparquet.MetaRows] != "250" ||
		head.Metadata[archiveparquet.MetaLastSequence] != seq(249) {
		t.Errorf("HeadObject content type %q metadata %v", aws.ToString(head.ContentType), head.Metadata)
	}
}

func TestIntegrationPoisonRecord(t *testing.T) {
	client, name := mustBucket(t)
	ctx := t.Context()
	a := newArchiver(client, nil)
	a.Bucket = name
	batch := voteBatch(1000, 20)
	batch[12].Change.NewImage["bad"] = events.NewNumberAttribute("12abc") // a record no converter accepts

	resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: batch})
	if err != nil {
		t.Fatal(err)
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq(1012)}}
	if !reflect.DeepEqual(resp.BatchItemFailures, want) {
		t.Fatalf("failures %+v, want %+v (the poison record's sequence number)", resp.BatchItemFailures, want)
	}
	files, err := archiveparquet.ListFiles(ctx, client, name, "table=ddbpipe-votes/")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("objects %+v, want the one holding the 12 records before the poison", files)
	}
	rows, err := archiveparquet.ReadRows(ctx, client, name, files[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 12 || rows[11].SequenceNumber != seq(1011) {
		t.Errorf("%d rows archived before the poison, want 12 ending at %s", len(rows), seq(1011))
	}

	// Once the event source has sent the poison record to the on-failure
	// destination, the shard moves on from the record after it.
	resp, err = a.Handle(ctx, events.DynamoDBEvent{Records: batch[13:]})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("rest of the shard: %+v, %v", resp, err)
	}
	files, _ = archiveparquet.ListFiles(ctx, client, name, "table=ddbpipe-votes/")
	if len(files) != 2 {
		t.Errorf("objects %+v, want 2", files)
	}
}
