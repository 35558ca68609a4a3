package objectsddb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// The commit's conditions, step by step on one key, as the domain defines
// them (objectstest.Table is the reference).
func TestCommitConditions(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const key = "docs/a"
	steps := []struct {
		name        string
		remove      bool
		base        objects.Base
		version     int64 // of the record written; 0: base+1
		wantCurrent int64 // conflict: v0's version; 0 and no wantErr: success
		wantDeleted bool
		wantErr     error
	}{
		{name: "create on nothing", base: objects.Base{}},
		{name: "create again", base: objects.Base{}, wantCurrent: 1},
		{name: "on the latest", base: objects.Base{Version: 1}},
		{name: "on a stale version", base: objects.Base{Version: 1}, wantCurrent: 2},
		{name: "on a future version", base: objects.Base{Version: 7}, wantCurrent: 2},
		{name: "on the latest taken for a tombstone", base: objects.Base{Version: 2, Deleted: true}, wantCurrent: 2},
		{name: "a version that is not base+1", base: objects.Base{Version: 2}, version: 4, wantErr: objects.ErrNotApplied},
		{name: "remove on a stale version", remove: true, base: objects.Base{Version: 1}, wantCurrent: 2},
		{name: "remove", remove: true, base: objects.Base{Version: 2}},
		{name: "on the deleted version, as if live", base: objects.Base{Version: 2}, wantCurrent: 2, wantDeleted: true},
		{name: "create on nothing, after a delete", base: objects.Base{}, wantCurrent: 2, wantDeleted: true},
		{name: "on the tombstone", base: objects.Base{Version: 2, Deleted: true}},
		{name: "remove on a tombstone", remove: true, base: objects.Base{Version: 3, Deleted: true}, wantCurrent: 3},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var err error
			v := st.base.Version + 1
			if st.version != 0 {
				v = st.version
			}
			body := []byte(st.name)
			if st.remove {
				err = s.Remove(ctx, objects.Removal{Key: key, Base: st.base, Tombstone: objects.Record{Key: key, Version: st.base.Version}, History: []int64{1}})
			} else {
				err = s.Commit(ctx, objects.Commit{Base: st.base, Record: inline(key, v, body)})
			}
			var ce *objects.ConflictError
			switch {
			case st.wantErr != nil:
				if !errors.Is(err, st.wantErr) || errors.As(err, &ce) {
					t.Fatalf("got %v, want %v", err, st.wantErr)
				}
			case st.wantCurrent != 0:
				if !errors.As(err, &ce) || !errors.Is(err, objects.ErrConflict) || !errors.Is(err, objects.ErrNotApplied) {
					t.Fatalf("got %v, want a conflict", err)
				}
				if ce.Key != key || ce.Current != st.wantCurrent || ce.Deleted != st.wantDeleted {
					t.Errorf("conflict %+v, want current %d deleted %t", ce, st.wantCurrent, st.wantDeleted)
				}
			case err != nil:
				t.Fatal(err)
			case st.remove:
				latest, ok, err := s.Item(ctx, key, 0)
				if err != nil || !ok || !latest.Deleted || latest.Version != st.base.Version || latest.Kind != "" || latest.Data != nil {
					t.Errorf("v0 after remove: %+v %v %v, want a bare tombstone of v%d", latest.Meta(), ok, err, st.base.Version)
				}
			default:
				for _, version := range []int64{0, v} {
					got, ok, err := s.Item(ctx, key, version)
					if err != nil || !ok || !reflect.DeepEqual(got, inline(key, v, body)) {
						t.Errorf("item %d: %+v %v %v, want the record committed", version, got.Meta(), ok, err)
					}
				}
			}
		})
	}
}

// A history item that exists already (left by hand, or a bug) fails the
// commit although v0 is at its base: a conflict at the base, nothing
// written.
func TestCommitOverAnExistingHistoryItem(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.Commit(ctx, objects.Commit{Record: inline("k", 1, []byte("one"))}); err != nil {
		t.Fatal(err)
	}
	stray := inline("k", 2, []byte("stray"))
	if _, err := s.db.(*dynamodb.Client).PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: encode(stray, objects.SortKey(2))}); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, objects.Commit{Base: objects.Base{Version: 1}, Record: inline("k", 2, []byte("two"))})
	var ce *objects.ConflictError
	if !errors.As(err, &ce) || ce.Current != 1 || ce.Deleted {
		t.Fatalf("got %v, want a conflict at version 1", err)
	}
	if got, _, _ := s.Item(ctx, "k", 0); got.Version != 1 {
		t.Errorf("v0 is at %d after a cancelled commit, want 1", got.Version)
	}
	if got, _, _ := s.Item(ctx, "k", 2); !bytes.Equal(got.Data, []byte("stray")) {
		t.Error("the cancelled commit replaced v2")
	}
}

func TestItemAndList(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if l, err := s.List(ctx, "k"); err != nil || l.Exists || len(l.History) != 0 {
		t.Fatalf("empty list: %+v %v", l, err)
	}
	if _, ok, err := s.Item(ctx, "k", 0); ok || err != nil {
		t.Fatalf("missing item: %v %v", ok, err)
	}
	if _, _, err := s.Item(ctx, "k", -1); err == nil {
		t.Error("Item of version -1: no error")
	}
	// Six versions of 300 KB: a Query page stops at 1 MB, so the listing
	// takes several pages.
	const n = 6
	var recs []objects.Record
	for v := int64(1); v <= n; v++ {
		r := inline("k", v, random(300*KB, uint64(v)))
		if err := s.Commit(ctx, objects.Commit{Base: objects.Base{Version: v - 1}, Record: r}); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	// A neighbour key and a chunk item must not show in the listing.
	if err := s.Commit(ctx, objects.Commit{Record: inline("k/x", 1, []byte("x"))}); err != nil {
		t.Fatal(err)
	}
	m, chunks, _ := objects.Split([]byte("chunk"), 1024, "w9")
	if err := s.PutChunks(ctx, "k", m, chunks); err != nil {
		t.Fatal(err)
	}

	counting := &countingAPI{API: s.db}
	lister := *s
	lister.db = counting
	l, err := lister.List(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if q := counting.queries.Load(); q < 2 {
		t.Errorf("%d Query pages, want several", q)
	}
	if !l.Exists || !reflect.DeepEqual(l.Latest, recs[n-1].Meta()) {
		t.Errorf("latest %+v, want %+v", l.Latest, recs[n-1].Meta())
	}
	if len(l.History) != n {
		t.Fatalf("%d history items, want %d", len(l.History), n)
	}
	for i, r := range l.History {
		if !reflect.DeepEqual(r, recs[i].Meta()) {
			t.Errorf("history %d: %+v, want %+v (without data)", i, r, recs[i].Meta())
		}
	}
	for _, v := range []int64{0, 3} {
		got, ok, err := s.Item(ctx, "k", v)
		want := recs[n-1]
		if v != 0 {
			want = recs[v-1]
		}
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Item v%d: %+v %v %v", v, got.Meta(), ok, err)
		}
	}
}

type countingAPI struct {
	API
	queries atomic.Int32
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.API.Query(ctx, in, opts...)
}

// Remove takes the tombstone and 99 history deletes in one transaction of
// 100 actions; more is refused before any request. DeleteHistory takes any
// number, in batches, and ignores missing items.
func TestRemoveAndDeleteHistory(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	const versions = 130
	for v := int64(1); v <= versions; v++ {
		if err := s.Commit(ctx, objects.Commit{Base: objects.Base{Version: v - 1}, Record: inline("k", v, []byte(fmt.Sprint(v)))}); err != nil {
			t.Fatal(err)
		}
	}
	all := make([]int64, versions)
	for i := range all {
		all[i] = int64(i + 1)
	}
	tomb := objects.Record{Key: "k", Version: versions}
	base := objects.Base{Version: versions}
	if err := s.Remove(ctx, objects.Removal{Key: "k", Base: base, Tombstone: tomb, History: all[:100]}); !errors.Is(err, objects.ErrNotApplied) {
		t.Fatalf("remove with 100 history items: %v, want ErrNotApplied", err)
	}
	if err := s.Remove(ctx, objects.Removal{Key: "k", Base: base, Tombstone: tomb, History: append(all[:99:99], 1, 2)}); err != nil {
		t.Fatalf("remove with 99 history items (and duplicates): %v", err)
	}
	if err := s.DeleteHistory(ctx, "k", []int64{0, 100}); !errors.Is(err, objects.ErrNotApplied) {
		t.Errorf("DeleteHistory of v0: %v, want ErrNotApplied", err)
	}
	if err := s.DeleteHistory(ctx, "k", append(all, 500, 501)); err != nil { // 99 of them and two never were
		t.Fatal(err)
	}
	items := scan(t, db, s.table)
	if len(items) != 1 {
		t.Fatalf("%d items left, want the tombstone", len(items))
	}
	if r, err := decode(items[0]); err != nil || !r.Deleted || r.Version != versions {
		t.Errorf("left %+v, %v; want the tombstone of v%d", r, err, versions)
	}
}

// CommitItems are exactly the items Commit writes (a loader that writes
// them is indistinguishable from PUTs), the index key included.
func TestCommitItemsAreWhatCommitWrites(t *testing.T) {
	s, db := newStore(t)
	s.IndexShards = 8
	r := inline("load/a.txt", 1, []byte("twenty bytes of text"))
	if err := s.Commit(context.Background(), objects.Commit{Record: r}); err != nil {
		t.Fatal(err)
	}
	v0, v1 := s.CommitItems(r)
	want := map[string]map[string]types.AttributeValue{objects.LatestSortKey: v0, objects.SortKey(1): v1}
	got := scan(t, db, s.table)
	if len(got) != 2 {
		t.Fatalf("Commit wrote %d items, want 2", len(got))
	}
	for _, item := range got {
		sk := item["sk"].(*types.AttributeValueMemberS).Value
		if !reflect.DeepEqual(item, want[sk]) {
			t.Errorf("%s: Commit wrote %v, CommitItems gives %v", sk, item, want[sk])
		}
	}
	if _, ok := v0["listShard"]; !ok {
		t.Error("v0 of a live object has no index key")
	}
}
