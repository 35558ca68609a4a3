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
		sub, _ := r.Properties["QueryString"].(map[string]any)["Fn::Sub"].([]any)
		if len(sub) != 2 {
			t.Errorf("%s: QueryString is not !Sub [sql, {variables}]: %v", q.Name, r.Properties["QueryString"])
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
		for _, prop := range []string{"Database", "WorkGroup"} {
			if len(cfn.Refs(r.Properties[prop])) != 1 {
				t.Errorf("%s: %s = %v, want a !Ref", q.Name, prop, r.Properties[prop])
			}
		}
	}
}

// TestTemplateGlueTableSchema: the Glue table's columns are the Parquet
// files' columns (lower case, as Glue keeps them) with matching types, and
// its partition keys are the folders' (table, month), projected.
func TestTemplateGlueTableSchema(t *testing.T) {
	tpl := mustTemplate(t)
	ids := tpl.ResourceIDs("AWS::Glue::Table")
	if len(ids) != 1 {
		t.Fatalf("Glue tables %v, want one", ids)
	}
	// An older first month than the default: the projection must follow it.
	params, err := tpl.ParamValues(map[string]string{"ArchiveFirstMonth": "2025-06"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfn.Context{Params: params, Names: placeholderNames{}, Pseudo: map[string]string{
		"AWS::Region": "us-east-1", "AWS::AccountId": "000000000000", "AWS::StackName": "ddbpipe",
		"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
	}}
	resolved, err := tpl.Resolve(tpl.Resources[ids[0]].Properties, ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := resolved.(map[string]any)["TableInput"].(map[string]any)
	sd := in["StorageDescriptor"].(map[string]any)

	// Parquet: "required binary eventId (STRING);", "required int64 approximateCreationTime (TIMESTAMP(...))".
	glueType := func(physical, logical string) string {
		switch {
		case strings.HasPrefix(logical, "TIMESTAMP"):
			return "timestamp"
		case physical == "binary" && logical == "STRING":
			return "string"
		case physical == "boolean":
			return "boolean"
		}
		return "?" + physical + " " + logical
	}
	field := regexp.MustCompile(`(?m)^\s*(?:required|optional) (\w+) (\w+)(?: \((\w+).*\))?;$`)
	partitionKeys := map[string]bool{"table": true, "month": true}
	var want, wantKeys [][2]string
	for _, m := range field.FindAllStringSubmatch(archiveparquet.Schema(), -1) {
		col := [2]string{strings.ToLower(m[2]), glueType(m[1], m[3])}
		if partitionKeys[col[0]] {
			wantKeys = append(wantKeys, col)
			continue
		}
		want = append(want, col)
	}
	columns := func(v any) [][2]string {
		var out [][2]string
		for _, c := range v.([]any) {
			m := c.(map[string]any)
			out = append(out, [2]string{cfn.Scalar(m["Name"]), cfn.Scalar(m["Type"])})
		}
		return out
	}
	if got := columns(sd["Columns"]); !reflect.DeepEqual(got, want) {
		t.Errorf("Glue columns\n got %v\nwant %v (from archiveparquet.Schema)", got, want)
	}
	if got := columns(in["PartitionKeys"]); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("partition keys %v, want %v", got, wantKeys)
	}

	p := in["Parameters"].(map[string]any)
	for k, want := range map[string]string{
		"projection.enabled":        "true",
		"projection.table.type":     "enum",
		"projection.table.values":   "ddbpipe-votes,ref-ObjectsTable",
		"projection.month.type":     "date",
		"projection.month.format":   "yyyy-MM",
		"storage.location.template": "s3://ref-ArchiveBucket/table=${table}/month=${month}/",
	} {
		if got := cfn.Scalar(p[k]); got != want {
			t.Errorf("parameter %s = %q, want %q", k, got, want)
		}
	}
	if r := cfn.Scalar(p["projection.month.range"]); r != "2025-06,NOW" {
		t.Errorf("projection.month.range = %q, want the ArchiveFirstMonth parameter,NOW", r)
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
	// The projected folder is the one the archive writes.
	part := archive.PartitionOf("ddbpipe-votes-2026-11", time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	loc := strings.NewReplacer("${table}", part.Table, "${month}", part.Month).Replace(cfn.Scalar(p["storage.location.template"]))
	if want := "s3://ref-ArchiveBucket/" + part.Prefix(); loc != want {
		t.Errorf("projected location %s, want %s", loc, want)
	}
}
