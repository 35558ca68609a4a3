package archivelambda_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
)

func TestFromLambdaFixture(t *testing.T) {
	ev := archivetest.MustLoadEvent(t, "testdata/stream-event.json")
	want := []struct {
		event, seq string
		created    time.Time
		ttl        bool
		hasNew     bool
		hasOld     bool
	}{
		{"INSERT", "4421584500000000017450439091", time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC), false, true, false},
		{"MODIFY", "4421584500000000017450439092", time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC), false, true, true},
		{"REMOVE", "4421584500000000017450439100", time.Date(2026, 12, 1, 0, 1, 0, 0, time.UTC), true, false, true},
	}
	for i, r := range ev.Records {
		got, err := archivelambda.FromLambda(r)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		w := want[i]
		if got.Table != archivetest.LedgerTable || got.Stream != "2026-11-01T00:00:00.000" || got.EventName != w.event ||
			got.SequenceNumber != w.seq || !got.CreatedAt.Equal(w.created) || got.TTLDelete != w.ttl ||
			(got.NewImage != nil) != w.hasNew || (got.OldImage != nil) != w.hasOld || got.EventID != r.EventID {
			t.Errorf("record %d = %+v", i, got)
		}
	}
	first, _ := archivelambda.FromLambda(ev.Records[0])
	img := first.NewImage
	checks := map[string]any{
		"weight":  archive.Number("12345678901234567890.123456789"),
		"huge":    archive.Number("9.9999999999999999999999999999999999999E+125"),
		"sig":     []byte{0, 1, 2, 0xff, 0},
		"note":    nil,
		"tags":    []string{"green", "blue"},
		"scores":  []archive.Number{"10", "2.50", "-3e2"},
		"blobs":   [][]byte{{0xff}, {0}},
		"history": []any{"x", archive.Number("1"), []any{}, map[string]any{}},
		"meta":    map[string]any{"client": map[string]any{"ua": "cli/1.0"}, "empty": map[string]any{}},
	}
	for k, want := range checks {
		if got := img[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("NewImage[%q] = %#v, want %#v", k, got, want)
		}
	}
}

func TestFromLambdaPoison(t *testing.T) {
	base := archivetest.VoteRecord(1)
	tests := []struct {
		name    string
		change  func(*events.DynamoDBEventRecord)
		wantErr error
	}{
		{"no ARN", func(r *events.DynamoDBEventRecord) { r.EventSourceArn = "" }, archivelambda.ErrBadARN},
		{"zero attribute value", func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage = map[string]events.DynamoDBAttributeValue{"x": {}}
		}, ddbstream.ErrUnsupportedType},
		{"bad number", func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage = map[string]events.DynamoDBAttributeValue{"n": events.NewNumberAttribute("1,5")}
		}, ddbstream.ErrInvalidNumber},
		{"empty set in old image", func(r *events.DynamoDBEventRecord) {
			r.Change.OldImage = map[string]events.DynamoDBAttributeValue{"s": events.NewStringSetAttribute(nil)}
		}, ddbstream.ErrEmptySet},
		{"bad key", func(r *events.DynamoDBEventRecord) {
			r.Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": events.NewNumberAttribute("abc")}
		}, ddbstream.ErrInvalidNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.change(&r)
			if _, err := archivelambda.FromLambda(r); !errors.Is(err, tt.wantErr) {
				t.Errorf("FromLambda err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// The same item read by a Scan and carried by a stream record gives the same
// key and checksum, so the verification can compare them.
func TestScanAndStreamAgree(t *testing.T) {
	ev := archivetest.MustLoadEvent(t, "testdata/stream-event.json")
	rec, err := archivelambda.FromLambda(ev.Records[0])
	if err != nil {
		t.Fatal(err)
	}
	row, err := archive.NewRow(rec)
	if err != nil {
		t.Fatal(err)
	}
	scanned, err := ddbstream.LambdaToDynamo(ev.Records[0].Change.NewImage) // what GetItem/Scan would return
	if err != nil {
		t.Fatal(err)
	}
	// A Scan returns set members in its own order.
	scanned["tags"] = &dynamotypes.AttributeValueMemberSS{Value: []string{"blue", "green"}}
	item, err := archiveddb.Plain(scanned)
	if err != nil {
		t.Fatal(err)
	}
	key, err := archive.KeyJSON(item, "pk", "sk")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := archive.Checksum(item)
	if err != nil {
		t.Fatal(err)
	}
	replay := archive.NewReplay()
	if err := replay.Add(row); err != nil {
		t.Fatal(err)
	}
	if rep := archive.Verify(replay.State(), archive.State{key: sum}); !rep.OK() {
		t.Errorf("scan and stream disagree: %s %+v", rep, rep)
	}
}
