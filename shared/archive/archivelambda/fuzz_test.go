package archivelambda_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
)

// FuzzStreamRecord: any stream record, as Lambda would deliver it, is
// converted or refused (a poison record), never a panic; a converted
// record's images round-trip through the archive's JSON, and its row
// through a Parquet file, unchanged; and the file made of the record's
// images is the file made of its row's JSON.
func FuzzStreamRecord(f *testing.F) {
	fixture, err := os.ReadFile("testdata/stream-event.json")
	if err != nil {
		f.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(fixture, &ev); err != nil {
		f.Fatal(err)
	}
	for _, r := range ev.Records {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"eventName":"INSERT","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/t-votes-2026-11/stream/x","dynamodb":{"SequenceNumber":"1","ApproximateCreationDateTime":1,"Keys":{"pk":{"SS":[]}}}}`))
	f.Add([]byte(`{"eventName":"REMOVE","dynamodb":{"Keys":{"pk":{"N":"1e999999"}},"NewImage":{"a":{"L":[{"M":{"b":{"B":"!!"}}}]}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, ok := decodeRecord(body)
		if !ok {
			return
		}
		rec, err := archivelambda.FromLambda(r)
		if err != nil {
			return
		}
		objs, err := archive.Group([]archive.Record{rec})
		if err != nil {
			return
		}
		for _, o := range objs {
			for _, row := range o.Rows {
				for _, img := range []string{row.Keys, row.NewImage, row.OldImage} {
					item, err := archive.ParseImage(img)
					if err != nil {
						t.Fatalf("ParseImage(%s): %v", img, err)
					}
					if back, err := archive.ImageJSON(item); err != nil || back != img {
						t.Fatalf("image %s read back as %s (%v)", img, back, err)
					}
				}
			}
			data, err := archiveparquet.MarshalObject(o)
			if err != nil {
				t.Fatalf("encode %+v: %v", o.Rows, err)
			}
			if fromJSON, err := archiveparquet.Marshal(o.Rows); err != nil || !bytes.Equal(fromJSON, data) {
				t.Fatalf("the file of %+v's images differs from the file of its JSON (%v)", o.Rows, err)
			}
			got, err := archiveparquet.Unmarshal(data)
			if err != nil || !reflect.DeepEqual(got, o.Rows) {
				t.Fatalf("Parquet round trip:\n got %+v (%v)\nwant %+v", got, err, o.Rows)
			}
		}
	})
}

// decodeRecord decodes a record as aws-lambda-go does before the handler
// runs. Its decoder panics on some JSON that no stream delivers (a binary
// set holding an object: testdata/fuzz/FuzzStreamRecord/58ecb684859864b6,
// found by make soak's fuzzing); in a function, lambda.Start's invoke loop
// recovers that panic, reports the invocation failed and ends the
// environment, and the event source retries the batch, then sends it to
// the stream failures queue. Such input never reaches the handler, so it
// is skipped here.
func decodeRecord(body []byte) (r events.DynamoDBEventRecord, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return r, json.Unmarshal(body, &r) == nil
}
