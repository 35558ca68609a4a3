package objectsddb

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// The index holds v0 of live objects only: a commit enters it, a newer
// version replaces it, a tombstone takes it out, history never enters. A
// listing over it answers as S3 would, through DynamoDB Local's own Query.
func TestIndexListsLatestLiveVersions(t *testing.T) {
	db := newClient(t)
	s := New(db, newIndexedTable(t, db))
	s.IndexShards = 4
	ctx := context.Background()
	commit := func(key string, version int64, body string) {
		t.Helper()
		if err := s.Commit(ctx, objects.Commit{Base: objects.Base{Version: version - 1}, Record: inline(key, version, []byte(body))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		commit(fmt.Sprintf("docs/%02d.txt", i), 1, "one")
	}
	commit("docs/05.txt", 2, "two") // a second version: listed once, as v2
	commit("photos/a.png", 1, "img")
	commit("gone.txt", 1, "x")
	if err := s.Remove(ctx, objects.Removal{Key: "gone.txt", Base: objects.Base{Version: 1}, Tombstone: objects.Record{Version: 1}}); err != nil {
		t.Fatal(err)
	}
	l := &objects.Lister{Index: NewIndex(db, s.table), Shards: s.IndexShards}
	var keys []string
	var cursor string
	for pages := 0; ; pages++ {
		p, err := l.List(ctx, objects.ListOptions{Prefix: "docs/", Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			keys = append(keys, e.Key)
			if e.Key == "docs/05.txt" && (e.Version != 2 || e.Size != 3 || e.SHA256 != objects.SumOf([]byte("two")) || e.ContentType != "text/plain" || e.Modified.IsZero()) {
				t.Errorf("docs/05.txt listed as %+v, want version 2 of \"two\"", e)
			}
		}
		if cursor = p.Cursor; cursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("no end")
		}
	}
	if len(keys) != 30 || !slices.IsSorted(keys) || keys[0] != "docs/00.txt" {
		t.Errorf("listed %d keys %v, want docs/00.txt … docs/29.txt in order", len(keys), keys)
	}
	top, err := l.List(ctx, objects.ListOptions{Delimiter: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(top.Prefixes) != "[docs/ photos/]" || len(top.Entries) != 0 || top.Cursor != "" {
		t.Errorf("top level: prefixes %v, entries %+v, cursor %q; want docs/ and photos/ only (gone.txt is deleted)", top.Prefixes, top.Entries, top.Cursor)
	}
	// Only v0 items of live objects carry the index key.
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.table), IndexName: aws.String(IndexName)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 31 {
		t.Errorf("the index holds %d items, want 31 (30 docs, a photo, and no history or tombstone)", out.Count)
	}
}

// The packed listing entry reads back as written, and a damaged one is an
// error, not a wrong entry.
func TestPackedEntryRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 21, 50, 1, 123456789, time.UTC)
	for _, r := range []objects.Record{
		{Key: "a", Version: 1, Size: 20, CreatedAt: at, ContentType: "text/plain", SHA256: objects.SumOf([]byte("x"))},
		{Key: "b", Version: objects.MaxVersion, Size: 5 << 30, CreatedAt: at, ContentType: strings.Repeat("t", 255), SHA256: objects.SumOf(nil)},
		{Key: "c", Version: 7, Size: 0, ContentType: ""}, // no time, no type
	} {
		var e objects.Entry
		if err := unpackEntry(packEntry(r), &e); err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		if e.Version != r.Version || e.Size != r.Size || !e.Modified.Equal(r.CreatedAt) || e.ContentType != r.ContentType || e.SHA256 != r.SHA256 {
			t.Errorf("%s: got %+v from %+v", r.Key, e, r)
		}
	}
	good := packEntry(objects.Record{Version: 3, Size: 9, CreatedAt: at, SHA256: objects.SumOf([]byte("y"))})
	for name, b := range map[string][]byte{
		"empty":           nil,
		"cut in a varint": {0x80},
		"cut in the sum":  good[:len(good)-5],
		"huge version":    append(binary.AppendUvarint(nil, math.MaxUint64), good[1:]...),
	} {
		var e objects.Entry
		if err := unpackEntry(b, &e); err == nil {
			t.Errorf("%s: unpacked %+v without an error", name, e)
		}
	}
}
