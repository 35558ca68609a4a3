package archiveduckdb_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
)

// runNamed runs a named query, with its parameters, as `ddbpipe archive
// query -named` does.
func runNamed(t *testing.T, db *archiveduckdb.DB, name string, args ...any) *archiveduckdb.Result {
	t.Helper()
	q, err := archive.LookupNamedQuery(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != len(q.Params) {
		t.Fatalf("%s takes %d parameters (%v), the test gives %d", name, len(q.Params), q.Params, len(args))
	}
	sql, err := q.Expand(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	return mustQuery(t, db, sql, args...)
}

// checkNamedQueries runs every named query for month and compares each
// answer with the one computed from the votes generated (vs: every month's)
// and the object changes mustLedgerArchive wrote: exact counts.
func checkNamedQueries(t *testing.T, db *archiveduckdb.DB, vs []vote, month string) {
	t.Helper()
	var inMonth []vote
	for _, v := range vs {
		if strings.HasSuffix(v.table, month) {
			inMonth = append(inMonth, v)
		}
	}
	if len(inMonth) == 0 {
		t.Fatalf("no votes generated in %s", month)
	}
	seen := map[string]bool{}

	// votes-per-option, for every poll, and one with no votes.
	seen["votes-per-option"] = true
	for _, poll := range append(append([]string{}, polls...), onePerVoterPoll, "no-such-poll") {
		want := map[string]int64{}
		for _, v := range inMonth {
			if v.poll == poll {
				want[v.option]++
			}
		}
		got := map[string]int64{}
		var order []string
		for _, r := range runNamed(t, db, "votes-per-option", month, poll).Rows {
			got[r[0].(string)] = r[1].(int64)
			order = append(order, r[0].(string))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s votes-per-option %s\n got %v\nwant %v", month, poll, got, want)
		}
		if !sort.StringsAreSorted(order) {
			t.Errorf("%s votes-per-option %s: options %v not in order", month, poll, order)
		}
	}

	seen["votes-per-poll-per-day"] = true
	want := map[string]int64{}
	for _, v := range inMonth {
		want[v.poll+" "+v.option+" "+v.at.UTC().Format("2006-01-02")]++
	}
	got := map[string]int64{}
	for _, r := range runNamed(t, db, "votes-per-poll-per-day", month).Rows {
		k := r[0].(string) + " " + r[1].(string) + " " + r[2].(time.Time).Format("2006-01-02")
		if _, dup := got[k]; dup {
			t.Errorf("%s votes-per-poll-per-day: %s twice", month, k)
		}
		got[k] = r[3].(int64)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s votes per poll per day\n got %v\nwant %v", month, got, want)
	}

	seen["voter-history"] = true
	for _, voter := range []string{"voter-0", "voter-7", "voter-49", "nobody"} {
		var wantRows []string
		var mine []vote
		for _, v := range inMonth {
			if v.voter == voter {
				mine = append(mine, v)
			}
		}
		sort.Slice(mine, func(i, j int) bool {
			if !mine[i].at.Equal(mine[j].at) {
				return mine[i].at.Before(mine[j].at)
			}
			return mine[i].id < mine[j].id
		})
		for _, v := range mine {
			wantRows = append(wantRows, fmt.Sprintf("%s %s %s %s %s", v.at.UTC().Format(time.RFC3339), v.poll, v.option, v.id,
				v.at.Add(2*time.Second).UTC().Format(time.RFC3339)))
		}
		var gotRows []string
		for _, r := range runNamed(t, db, "voter-history", month, voter).Rows {
			gotRows = append(gotRows, fmt.Sprintf("%s %s %s %s %s", r[0].(time.Time).Format(time.RFC3339), r[1], r[2], r[3],
				r[4].(time.Time).Format(time.RFC3339)))
		}
		if !reflect.DeepEqual(gotRows, wantRows) {
			t.Errorf("%s voter-history %s\n got %q\nwant %q", month, voter, gotRows, wantRows)
		}
	}

	seen["object-changes"] = true
	for key, want := range map[string][]string{"docs/a.txt": {"INSERT", "MODIFY", "REMOVE"}, "docs/b.txt": {"INSERT"}} {
		if month != "2026-11" {
			want = nil
		}
		var got []string
		for _, r := range runNamed(t, db, "object-changes", month, key).Rows {
			got = append(got, r[1].(string))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s object-changes %s: %v, want %v", month, key, got, want)
		}
	}

	for _, q := range archive.NamedQueries {
		if !seen[q.Name] {
			t.Errorf("named query %s is not checked", q.Name)
		}
	}
}
