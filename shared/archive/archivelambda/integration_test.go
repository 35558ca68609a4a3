package archivelambda_test

import (
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func TestIntegrationArchiveToS3(t *testing.T) {
	client, name := stacktest.Bucket(t, "archive-it")
	ctx := t.Context()
	a := newArchiver(client, name, nil)
	batch := archivetest.VoteBatch(0, 250)
	prefix := archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}.Prefix()

	// The same batch twice (a retry after a timeout, or a redelivery): one object.
	for attempt := 1; attempt <= 2; attempt++ {
		resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: batch})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("attempt %d: Handle = %+v, %v", attempt, resp, err)
		}
	}
	files, err := archives3.ListFiles(ctx, client, name, prefix)
	if err != nil {
		t.Fatal(err)
	}
	wantKey := prefix + "stream-2026-11-01T000000.000-" + archive.PadSequence(archivetest.Seq(0)) + ".parquet"
	if len(files) != 1 || files[0].Key != wantKey {
		t.Fatalf("objects after two deliveries: %+v, want one at %s", files, wantKey)
	}

	// Read back: the rows are the batch's rows, in order.
	got, err := archives3.ReadRows(ctx, client, name, wantKey)
	if err != nil {
		t.Fatal(err)
	}
	var recs []archive.Record
	for _, r := range batch {
		rec, err := archivelambda.FromLambda(r)
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
	if aws.ToString(head.ContentType) != archiveparquet.ContentType || head.Metadata[archives3.MetaRows] != "250" ||
		head.Metadata[archives3.MetaLastSequence] != archivetest.Seq(249) {
		t.Errorf("HeadObject content type %q metadata %v", aws.ToString(head.ContentType), head.Metadata)
	}
}

func TestIntegrationPoisonRecord(t *testing.T) {
	client, name := stacktest.Bucket(t, "archive-it")
	ctx := t.Context()
	a := newArchiver(client, name, nil)
	batch := archivetest.VoteBatch(1000, 20)
	batch[12].Change.NewImage["bad"] = events.NewNumberAttribute("12abc") // a record no converter accepts

	resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: batch})
	if err != nil {
		t.Fatal(err)
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: archivetest.Seq(1012)}}
	if !reflect.DeepEqual(resp.BatchItemFailures, want) {
		t.Fatalf("failures %+v, want %+v (the poison record's sequence number)", resp.BatchItemFailures, want)
	}
	files, err := archives3.ListFiles(ctx, client, name, "table=ddbpipe-votes/")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("objects %+v, want the one holding the 12 records before the poison", files)
	}
	rows, err := archives3.ReadRows(ctx, client, name, files[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 12 || rows[11].SequenceNumber != archivetest.Seq(1011) {
		t.Errorf("%d rows archived before the poison, want 12 ending at %s", len(rows), archivetest.Seq(1011))
	}

	// Once the event source has sent the poison record to the on-failure
	// destination, the shard moves on from the record after it.
	resp, err = a.Handle(ctx, events.DynamoDBEvent{Records: batch[13:]})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("rest of the shard: %+v, %v", resp, err)
	}
	files, _ = archives3.ListFiles(ctx, client, name, "table=ddbpipe-votes/")
	if len(files) != 2 {
		t.Errorf("objects %+v, want 2", files)
	}
}
