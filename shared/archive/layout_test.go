package archive_test

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

// TestImageRoundTrip: ImageJSON then ParseImage gives the image back, for
// every attribute type (sets, binary, nested maps and lists, 38-digit
// numbers), so the archive's JSON is lossless.
func TestImageRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		img := archivetest.RandomItem(r, 6)
		j, err := archive.ImageJSON(img)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		back, err := archive.ParseImage(j)
		if err != nil {
			t.Fatalf("item %d: ParseImage(%s): %v", i, j, err)
		}
		again, err := archive.ImageJSON(back)
		if err != nil || again != j {
			t.Fatalf("item %d: round trip\n got %s (%v)\nwant %s", i, again, err, j)
		}
		if want, _ := archive.Checksum(img); want != archive.ChecksumJSON(j) {
			t.Fatalf("item %d: Checksum differs from ChecksumJSON of its JSON", i)
		}
	}
}

func TestParseImageRejects(t *testing.T) {
	for _, in := range []string{
		`[]`, `{"a":"plain"}`, `{"a":{"S":"x","N":"1"}}`, `{"a":{"Q":"x"}}`, `{"a":{"S":1}}`,
		`{"a":{"B":"not base64!"}}`, `{"a":{"L":{"S":"x"}}}`, `{"a":{"M":{"b":"plain"}}}`, `{"a":`,
	} {
		if img, err := archive.ParseImage(in); err == nil {
			t.Errorf("ParseImage(%s) = %v, want an error", in, img)
		}
	}
}

// TestLayoutSplitJoin: for every layout, an image split into typed columns
// and extra joins back to itself, whatever its attributes hold.
func TestLayoutSplitJoin(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, l := range archive.Layouts {
		for i := range 2000 {
			img := archivetest.RandomLedgerItem(r)
			if i%2 == 1 {
				img = archivetest.RandomItem(r, 5)
			}
			vals, extra := l.Split(img)
			back, err := l.Join(vals, extra)
			if err != nil {
				t.Fatalf("%s item %d: Join: %v", l.Name, i, err)
			}
			want, _ := archive.ImageJSON(img)
			got, _ := archive.ImageJSON(back)
			if got != want {
				t.Fatalf("%s item %d:\n got %s\nwant %s\nvals %v extra %v", l.Name, i, got, want, vals, extra)
			}
		}
	}
}

func TestLedgerLayoutTypesAVote(t *testing.T) {
	cast := time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC)
	img := archive.Item{
		"pk": "p1#7", "sk": "voter-1#vote-9", "pollId": "p1", "optionId": "red", "voterId": "voter-1", "voteId": "vote-9",
		"castAt": cast.Format(time.RFC3339Nano), "countedAt": "2026-11-23T10:00:01Z",
	}
	vals, extra := archive.LedgerLayout.Split(img)
	if extra != nil {
		t.Errorf("extra = %v, want none: every attribute of a vote has its column", extra)
	}
	got := map[string]any{}
	for i, c := range archive.LedgerLayout.Columns {
		got[c.Name] = vals[i]
	}
	want := map[string]any{
		"poll_id": "p1", "option_id": "red", "voter_id": "voter-1", "vote_id": "vote-9", "pk": "p1#7",
		"cast_at": cast, "counted_at": time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC), "sk_form": int32(1),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("typed values\n got %v\nwant %v", got, want)
	}
	img["sk"], img["castAt"], img["votes"] = "voter-1", "2026-11-23T10:00:00.123456789Z", archive.Number("1")
	vals, extra = archive.LedgerLayout.Split(img)
	var names []string
	for k := range extra {
		names = append(names, k)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"castAt", "votes"}) {
		t.Errorf("extra holds %v, want castAt (nanoseconds do not fit a µs column) and votes (undeclared)", names)
	}
	if vals[7] != int32(2) {
		t.Errorf("sk_form = %v, want 2 (one vote per voter)", vals[7])
	}
}

func TestLayoutFor(t *testing.T) {
	for base, want := range map[string]string{
		"ddbpipe-votes": "ledger", "shop-votes": "ledger", "ddbpipe-objects": "objects", "ddbpipe-counters": "generic", "votes": "generic",
	} {
		if got := archive.LayoutFor(base).Name; got != want {
			t.Errorf("LayoutFor(%q) = %s, want %s", base, got, want)
		}
	}
}
