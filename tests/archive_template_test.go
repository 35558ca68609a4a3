package tests

import (
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
)

// TestTemplateNamedQueriesMatch: each AWS::Athena::NamedQuery carries the
// SQL text of archive.NamedQueries (the one `ddbpipe archive query -named`
// runs) with only the table names filled in by !Sub, and gives every
// variable the SQL uses.
func TestTemplateNamedQueriesMatch(t *testing.T) {
	tpl := mustTemplate(t)
	byName := map[string]cfn.Resource{}
	for _, id := range tpl.ResourceIDs("AWS::Athena::NamedQuery") {
		r := tpl.Resources[id]
		byName[cfn.Scalar(r.Properties["Name"])] = r
	}
	if len(byName) != len(archive.NamedQueries) {
		t.Errorf("%d named queries in the template, %d in archive.NamedQueries", len(byName), len(archive.NamedQueries))
	}
	for _, q := range archive.NamedQueries {
		r, ok := byName[q.Name]
		if !ok {
			t.Errorf("template has no named query %s", q.Name)
			continue
		}
		if plain, ok := r.Properties["QueryString"].(string); ok {
			if plain != q.SQL {
				t.Errorf("%s: the template's SQL differs from archive.NamedQueries:\n--- template\n%s\n--- Go\n%s", q.Name, plain, q.SQL)
			}
			if len(q.Variables()) > 0 {
				t.Errorf("%s: the SQL uses %v, the template's QueryString is no !Sub", q.Name, q.Variables())
			}
		} else {
			sub, _ := r.Properties["QueryString"].(map[string]any)["Fn::Sub"].([]any)
			if len(sub) != 2 {
				t.Errorf("%s: QueryString is neither the SQL nor !Sub [sql, {variables}]: %v", q.Name, r.Properties["QueryString"])
				continue
			}
			if sql, _ := sub[0].(string); sql != q.SQL {
				t.Errorf("%s: the template's SQL differs from archive.NamedQueries:\n--- template\n%s\n--- Go\n%s", q.Name, sql, q.SQL)
			}
			vars, _ := sub[1].(map[string]any)
			var names []string
			for k := range vars {
				names = append(names, k)
			}
			sort.Strings(names)
			if !reflect.DeepEqual(names, q.Variables()) {
				t.Errorf("%s: !Sub variables %v, the SQL uses %v", q.Name, names, q.Variables())
			}
		}
		if !strings.Contains(q.SQL, "month = ?") || !strings.HasPrefix(q.Params[0], "month") {
			t.Errorf("%s: not limited to one month (its first parameter)", q.Name)
		}
		for _, prop := range []string{"Database", "WorkGroup"} {
			if len(cfn.Refs(r.Properties[prop])) != 1 {
				t.Errorf("%s: %s = %v, want a !Ref", q.Name, prop, r.Properties[prop])
			}
		}
	}
}

// TestTemplateGlueTableSchema: one Glue table per table mapped to the
// archiver (the ledgers, the objects table), named as the named queries and
// DuckDB's views name them, whose columns are its layout's Parquet columns
// (archiveparquet.ColumnTypes) less table and month, with Athena's types;
// its partition key is month, projected from the ArchiveFirstMonth
// parameter, in the folder the archive writes.
func TestTemplateGlueTableSchema(t *testing.T) {
	tpl := mustTemplate(t)
	// An older first month than the default: the projection must follow it.
	params, err := tpl.ParamValues(map[string]string{"ArchiveFirstMonth": "2025-06"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfn.Context{Params: params, Names: placeholderNames{}, Pseudo: map[string]string{
		"AWS::Region": "us-east-1", "AWS::AccountId": "000000000000", "AWS::StackName": "ddbpipe",
		"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
	}}
	want := map[string]struct {
		layout archive.Layout
		source string // a table name whose records land in the Glue table
		base   string // its folder's table= value, resolved
	}{
		"votes":   {archive.LedgerLayout, "ddbpipe-votes-2026-11", "ddbpipe-votes"},
		"objects": {archive.ObjectsLayout, "ddbpipe-objects", "ref-ObjectsTable"},
	}
	ids := tpl.ResourceIDs("AWS::Glue::Table")
	if len(ids) != len(want) {
		t.Fatalf("Glue tables %v, want %d", ids, len(want))
	}
	columns := func(v any) [][2]string {
		var out [][2]string
		for _, c := range v.([]any) {
			m := c.(map[string]any)
			out = append(out, [2]string{cfn.Scalar(m["Name"]), cfn.Scalar(m["Type"])})
		}
		return out
	}
	for _, id := range ids {
		resolved, err := tpl.Resolve(tpl.Resources[id].Properties, ctx)
		if err != nil {
			t.Fatal(err)
		}
		in := resolved.(map[string]any)["TableInput"].(map[string]any)
		name := cfn.Scalar(in["Name"])
		w, ok := want[name]
		if !ok {
			t.Errorf("Glue table %s (%s) is none of %v", name, id, want)
			continue
		}
		if got := archive.LayoutFor(archive.PartitionOf(w.source, time.Now()).Table); got.Name != w.layout.Name {
			t.Errorf("%s: %s's records are written in layout %s, the table declares %s", name, w.source, got.Name, w.layout.Name)
		}
		var wantCols [][2]string
		for _, c := range archiveparquet.ColumnTypes(w.layout) {
			if c[0] != "table" && c[0] != "month" {
				wantCols = append(wantCols, c)
			}
		}
		sd := in["StorageDescriptor"].(map[string]any)
		if got := columns(sd["Columns"]); !reflect.DeepEqual(got, wantCols) {
			t.Errorf("%s: Glue columns\n got %v\nwant %v (archiveparquet.ColumnTypes)", name, got, wantCols)
		}
		if got := columns(in["PartitionKeys"]); !reflect.DeepEqual(got, [][2]string{{"month", "string"}}) {
			t.Errorf("%s: partition keys %v, want month", name, got)
		}
		p := in["Parameters"].(map[string]any)
		for k, v := range map[string]string{
			"projection.enabled":        "true",
			"projection.month.type":     "date",
			"projection.month.format":   "yyyy-MM",
			"projection.month.range":    "2025-06,NOW",
			"storage.location.template": "s3://ref-ArchiveBucket/table=" + w.base + "/month=${month}/",
		} {
			if got := cfn.Scalar(p[k]); got != v {
				t.Errorf("%s: parameter %s = %q, want %q", name, k, got, v)
			}
		}
		// The projected folder is the one the archive writes.
		if w.base != "ref-ObjectsTable" {
			part := archive.PartitionOf(w.source, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
			loc := strings.NewReplacer("${month}", part.Month).Replace(cfn.Scalar(p["storage.location.template"]))
			if want := "s3://ref-ArchiveBucket/" + part.Prefix(); loc != want {
				t.Errorf("%s: projected location %s, want %s", name, loc, want)
			}
		}
	}
	first := tpl.Parameters["ArchiveFirstMonth"]
	pattern := regexp.MustCompile("^(?:" + first.AllowedPattern + ")$")
	for month, ok := range map[string]bool{"2026-01": true, "2019-12": true, "2026-13": false, "2026-00": false, "26-01": false, "2026-1": false, "2026-01,NOW": false} {
		if pattern.MatchString(month) != ok {
			t.Errorf("ArchiveFirstMonth's AllowedPattern accepts %q: %v, want %v", month, !ok, ok)
		}
	}
	if !pattern.MatchString(cfn.Scalar(first.Default)) {
		t.Errorf("ArchiveFirstMonth's default %v does not match its pattern", first.Default)
	}
	if _, err := tpl.ParamValues(map[string]string{"ArchiveFirstMonth": "2026-13"}); err == nil {
		t.Error("the local stack accepts ArchiveFirstMonth=2026-13")
	}
}
