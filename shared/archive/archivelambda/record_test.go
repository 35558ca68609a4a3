package archivelambda_test

import (
	"encoding/json"
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

// TestImage: the one conversion of a stream image on its way to Parquet,
// for every attribute type, nested and hostile values, each image given as
// Lambda's JSON delivers it (json: the handler's view) or, for what no JSON
// decodes to, as Go values (in). want is the image's archive JSON
// (archive.ImageJSON) and the Go value of attribute "v" (archive.Item's
// table); decodeErr: the runtime cannot decode the event, so no handler
// sees it.
func TestImage(t *testing.T) {
	tests := []struct {
		name      string
		json      string
		in        map[string]events.DynamoDBAttributeValue
		want      any
		wantJSON  string
		wantErr   error
		decodeErr bool
	}{
		{name: "S", json: `{"v":{"S":"h\u00e9llo ✓ \u0000 \"q\" \\ <&>"}}`, want: "héllo ✓ \x00 \"q\" \\ <&>",
			wantJSON: `{"v":{"S":"héllo ✓ \u0000 \"q\" \\ <&>"}}`},
		{name: "empty S", json: `{"v":{"S":""}}`, want: "", wantJSON: `{"v":{"S":""}}`},
		{name: "N keeps its text", json: `{"v":{"N":"-012.50"}}`, want: archive.Number("-012.50"), wantJSON: `{"v":{"N":"-012.50"}}`},
		{name: "N of 38 digits", json: `{"v":{"N":"99999999999999999999999999999999999999"}}`,
			want: archive.Number("99999999999999999999999999999999999999"), wantJSON: `{"v":{"N":"99999999999999999999999999999999999999"}}`},
		{name: "N largest", json: `{"v":{"N":"9.9999999999999999999999999999999999999E+125"}}`,
			want: archive.Number("9.9999999999999999999999999999999999999E+125"), wantJSON: `{"v":{"N":"9.9999999999999999999999999999999999999E+125"}}`},
		{name: "N smallest", json: `{"v":{"N":"-1E-130"}}`, want: archive.Number("-1E-130"), wantJSON: `{"v":{"N":"-1E-130"}}`},
		{name: "N of 39 digits", json: `{"v":{"N":"123456789012345678901234567890123456789"}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "N too large", json: `{"v":{"N":"1E+126"}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "N too small", json: `{"v":{"N":"1E-131"}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "N huge exponent", json: `{"v":{"N":"1e999999999"}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "N not a number", json: `{"v":{"N":"NaN"}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "N empty", json: `{"v":{"N":""}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "N not a string", json: `{"v":{"N":12}}`, decodeErr: true},
		{name: "B", json: `{"v":{"B":"AAEC/wA="}}`, want: []byte{0, 1, 2, 0xff, 0}, wantJSON: `{"v":{"B":"AAEC/wA="}}`},
		{name: "empty B", json: `{"v":{"B":""}}`, want: []byte{}, wantJSON: `{"v":{"B":""}}`},
		{name: "B invalid base64", json: `{"v":{"B":"!!"}}`, decodeErr: true},
		{name: "B unpadded base64", json: `{"v":{"B":"AAE"}}`, decodeErr: true},
		{name: "BOOL true", json: `{"v":{"BOOL":true}}`, want: true, wantJSON: `{"v":{"BOOL":true}}`},
		{name: "BOOL false", json: `{"v":{"BOOL":false}}`, want: false, wantJSON: `{"v":{"BOOL":false}}`},
		{name: "NULL", json: `{"v":{"NULL":true}}`, want: nil, wantJSON: `{"v":{"NULL":true}}`},
		{name: "SS keeps its order", json: `{"v":{"SS":["b","a",""]}}`, want: []string{"b", "a", ""}, wantJSON: `{"v":{"SS":["","a","b"]}}`},
		{name: "SS empty", json: `{"v":{"SS":[]}}`, wantErr: ddbstream.ErrEmptySet},
		{name: "SS duplicate", json: `{"v":{"SS":["a","a"]}}`, wantErr: ddbstream.ErrDuplicateInSet},
		{name: "NS", json: `{"v":{"NS":["10","2.50","-3e2","99999999999999999999999999999999999999"]}}`,
			want:     []archive.Number{"10", "2.50", "-3e2", "99999999999999999999999999999999999999"},
			wantJSON: `{"v":{"NS":["-3e2","2.50","10","99999999999999999999999999999999999999"]}}`},
		{name: "NS empty", json: `{"v":{"NS":[]}}`, wantErr: ddbstream.ErrEmptySet},
		{name: "NS numerically equal", json: `{"v":{"NS":["1.5","15E-1"]}}`, wantErr: ddbstream.ErrDuplicateInSet},
		{name: "NS bad member", json: `{"v":{"NS":["1","1E+126"]}}`, wantErr: ddbstream.ErrInvalidNumber},
		{name: "BS", json: `{"v":{"BS":["/w==","AA==",""]}}`, want: [][]byte{{0xff}, {0}, {}}, wantJSON: `{"v":{"BS":["","AA==","/w=="]}}`},
		{name: "BS empty", json: `{"v":{"BS":[]}}`, wantErr: ddbstream.ErrEmptySet},
		{name: "BS duplicate", json: `{"v":{"BS":["AA==","AA=="]}}`, wantErr: ddbstream.ErrDuplicateInSet},
		{name: "BS invalid base64", json: `{"v":{"BS":["AA==","%%"]}}`, decodeErr: true},
		{name: "L", json: `{"v":{"L":[{"S":"x"},{"N":"1"},{"L":[]},{"M":{}},{"NULL":true},{"SS":["z"]}]}}`,
			want:     []any{"x", archive.Number("1"), []any{}, map[string]any{}, nil, []string{"z"}},
			wantJSON: `{"v":{"L":[{"S":"x"},{"N":"1"},{"L":[]},{"M":{}},{"NULL":true},{"SS":["z"]}]}}`},
		{name: "M nested", json: `{"v":{"M":{"b":{"M":{"c":{"L":[{"B":"AA=="},{"NS":["2","1"]}]}}},"a":{"BOOL":false}}}}`,
			want:     map[string]any{"a": false, "b": map[string]any{"c": []any{[]byte{0}, []archive.Number{"2", "1"}}}},
			wantJSON: `{"v":{"M":{"a":{"BOOL":false},"b":{"M":{"c":{"L":[{"B":"AA=="},{"NS":["1","2"]}]}}}}}}`},
		{name: "empty set deep in a map", json: `{"v":{"M":{"a":{"L":[{"S":""},{"BS":[]}]}}}}`, wantErr: ddbstream.ErrEmptySet},
		{name: "nested 31 deep", json: nestedJSON(31), want: nestedValue(31), wantJSON: nestedJSON(31)},
		{name: "nested 33 deep", json: nestedJSON(33), wantErr: ddbstream.ErrTooDeep},
		{name: "unknown type", json: `{"v":{"X":"1"}}`, decodeErr: true},
		{name: "two types", json: `{"v":{"S":"a","N":"1"}}`, decodeErr: true},
		{name: "zero value", in: map[string]events.DynamoDBAttributeValue{"v": {}}, wantErr: ddbstream.ErrUnsupportedType},
		{name: "string not UTF-8", in: map[string]events.DynamoDBAttributeValue{"v": events.NewStringAttribute("a\xff")}, wantErr: ddbstream.ErrInvalidString},
		{name: "name not UTF-8", in: map[string]events.DynamoDBAttributeValue{"\xff": events.NewNullAttribute()}, wantErr: ddbstream.ErrInvalidString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if tt.json != "" {
				err := json.Unmarshal([]byte(tt.json), &in)
				if tt.decodeErr {
					if err == nil {
						t.Fatalf("%s decoded as %v, want a decoding error", tt.json, in)
					}
					return
				}
				if err != nil {
					t.Fatalf("decode %s: %v", tt.json, err)
				}
			}
			got, err := archivelambda.Image(in)
			if tt.wantErr != nil {
				var ae *ddbstream.AttributeError
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &ae) {
					t.Fatalf("Image = %v, %v; want an *AttributeError wrapping %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Image: %v", err)
			}
			if v := got["v"]; !reflect.DeepEqual(v, tt.want) {
				t.Errorf("Image v = %#v, want %#v", v, tt.want)
			}
			if j, err := archive.ImageJSON(got); err != nil || j != tt.wantJSON {
				t.Errorf("ImageJSON = %s, %v; want %s", j, err, tt.wantJSON)
			}
		})
	}
	for _, img := range []map[string]events.DynamoDBAttributeValue{nil, {}} {
		if got, err := archivelambda.Image(img); err != nil || (got == nil) != (img == nil) || len(got) != 0 {
			t.Errorf("Image(%#v) = %#v, %v", img, got, err)
		}
	}
}

// nestedJSON is an image whose "v" nests depth lists and maps around a
// number.
func nestedJSON(depth int) string {
	j := `{"N":"1"}`
	for i := range depth {
		if i%2 == 0 {
			j = `{"L":[` + j + `]}`
		} else {
			j = `{"M":{"k":` + j + `}}`
		}
	}
	return `{"v":` + j + `}`
}

// nestedValue is nestedJSON's "v" as the archive's values.
func nestedValue(depth int) any {
	var v any = archive.Number("1")
	for i := range depth {
		if i%2 == 0 {
			v = []any{v}
		} else {
			v = map[string]any{"k": v}
		}
	}
	return v
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
