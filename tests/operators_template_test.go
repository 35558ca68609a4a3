package tests

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// metricInventory reads the functions' code (the non-test Go files under
// shared/) and returns, per Function dimension, the EMF metric names that
// function emits: each emf.Metric literal's Name (a string, or a lookup in a
// package-level map of strings) belongs to the method's receiver type or the
// function that holds it; each lambdafn.NewMetrics(env, "fn") writer reaches
// the types built with it as their Metrics field and the functions it is
// passed to. A Name it cannot read, a writer that reaches nothing, or an
// emitter no writer reaches fails the test, so the inventory stays exact.
func metricInventory(t *testing.T) map[string]map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(filepath.Join(repoRoot(t), "shared"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Package-level maps of strings (e.g. placement kind → metric name).
	stringMaps := map[string][]string{} // "pkg.var" → its string values
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					cl, ok := v.(*ast.CompositeLit)
					if _, isMap := typeOf(cl).(*ast.MapType); !ok || !isMap {
						continue
					}
					for _, e := range cl.Elts {
						if s, ok := stringLit(e.(*ast.KeyValueExpr).Value); ok {
							stringMaps[f.Name.Name+"."+vs.Names[i].Name] = append(stringMaps[f.Name.Name+"."+vs.Names[i].Name], s)
						}
					}
				}
			}
		}
	}

	emits := map[string]map[string]bool{} // emitter ("pkg.Type" or "pkg.Func") → metric names
	reaches := map[string][]string{}      // Function dimension → emitters
	for _, f := range files {
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			emitter := pkg + "." + fd.Name.Name
			if fd.Recv != nil {
				emitter = typeKey(pkg, fd.Recv.List[0].Type)
			}
			metric := func(cl *ast.CompositeLit) {
				for _, e := range cl.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok || !isIdent(kv.Key, "Name") {
						continue
					}
					if s, ok := stringLit(kv.Value); ok {
						addName(emits, emitter, s)
					} else if ix, ok := kv.Value.(*ast.IndexExpr); ok && stringMaps[pkg+"."+identName(ix.X)] != nil {
						for _, s := range stringMaps[pkg+"."+identName(ix.X)] {
							addName(emits, emitter, s)
						}
					} else {
						t.Errorf("%s: a metric name the inventory cannot read", fset.Position(kv.Pos()))
					}
				}
			}
			// Writers: lambdafn.NewMetrics calls and the variables holding them.
			bound := map[string]string{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok {
					for i, rhs := range as.Rhs {
						if dim, ok := newMetrics(rhs); ok && i < len(as.Lhs) {
							bound[identName(as.Lhs[i])] = dim
						}
					}
				}
				return true
			})
			writer := func(e ast.Expr) (string, bool) {
				if dim, ok := newMetrics(e); ok {
					return dim, true
				}
				dim, ok := bound[identName(e)]
				return dim, ok && identName(e) != ""
			}
			found := map[string]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if isEMFMetric(n.Type) {
						metric(n)
					}
					if at, ok := n.Type.(*ast.ArrayType); ok && isEMFMetric(at.Elt) {
						for _, e := range n.Elts {
							if cl, ok := e.(*ast.CompositeLit); ok && cl.Type == nil {
								metric(cl)
							}
						}
					}
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Metrics") {
							if dim, ok := writer(kv.Value); ok {
								reaches[dim] = append(reaches[dim], typeKey(pkg, n.Type))
								found[dim] = true
							}
						}
					}
				case *ast.CallExpr:
					for _, a := range n.Args {
						if dim, ok := writer(a); ok && identName(a) != "" {
							reaches[dim] = append(reaches[dim], typeKey(pkg, n.Fun))
							found[dim] = true
						}
					}
					if dim, ok := newMetrics(n); ok {
						found[dim] = found[dim] || false
					}
				}
				return true
			})
			for dim, ok := range found {
				if !ok {
					t.Errorf("%s: the %q metrics writer reaches no type or function the inventory can follow", fset.Position(fd.Pos()), dim)
				}
			}
		}
	}
	inv := map[string]map[string]bool{}
	reached := map[string]bool{}
	for dim, emitters := range reaches {
		for _, e := range emitters {
			reached[e] = true
			for name := range emits[e] {
				addName(inv, dim, name)
			}
		}
	}
	for e := range emits {
		if !reached[e] {
			t.Errorf("%s emits metrics, but no function's metrics writer reaches it", e)
		}
	}
	return inv
}

func addName(m map[string]map[string]bool, k, name string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][name] = true
}

func typeOf(cl *ast.CompositeLit) ast.Expr {
	if cl == nil {
		return nil
	}
	return cl.Type
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

func isIdent(e ast.Expr, name string) bool { return identName(e) == name }

func identName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// typeKey names a type or function as "pkg.Name" (pointers and generics stripped).
func typeKey(pkg string, e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return typeKey(pkg, x.X)
	case *ast.UnaryExpr:
		return typeKey(pkg, x.X)
	case *ast.IndexExpr:
		return typeKey(pkg, x.X)
	case *ast.Ident:
		return pkg + "." + x.Name
	case *ast.SelectorExpr:
		return identName(x.X) + "." + x.Sel.Name
	}
	return fmt.Sprintf("%s.%T", pkg, e)
}

func isEMFMetric(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, "emf") && sel.Sel.Name == "Metric"
}

// newMetrics reads lambdafn.NewMetrics(env, "fn") and returns "fn".
func newMetrics(e ast.Expr) (string, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !isIdent(sel.X, "lambdafn") || sel.Sel.Name != "NewMetrics" {
		return "", false
	}
	return stringLit(call.Args[1])
}

// emitters lists the functions that emit a metric, for messages.
func emitters(inv map[string]map[string]bool, name string) []string {
	var fns []string
	for fn, names := range inv {
		if names[name] {
			fns = append(fns, fn)
		}
	}
	sort.Strings(fns)
	return fns
}

// TestTemplateAlarmsAndDashboardNameEmittedMetrics: every alarm and
// dashboard graph on the ddbpipe namespace names a metric that the function
// its Function dimension names really emits (metricInventory), so a renamed metric cannot
// leave an alarm that never fires; every alarm notifies the topic; the
// dashboard body is valid JSON once !Sub is resolved.
func TestTemplateAlarmsAndDashboardNameEmittedMetrics(t *testing.T) {
	tpl := mustTemplate(t)
	inv := metricInventory(t)
	for fn, must := range map[string]string{"counter": "VotesAccepted", "rotator": "RotationAlarms", "objects-api": "ChecksumFailures", "archiver": "RecordsArchived", "objects-sweeper": "SweepFailures"} {
		if !inv[fn][must] {
			t.Fatalf("the inventory has no %s for %s: it does not see the code's metrics (%v)", must, fn, inv)
		}
	}
	for fn, names := range inv {
		for name := range names {
			if !regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`).MatchString(name) {
				t.Errorf("%s emits %q, not a metric name", fn, name)
			}
		}
	}
	alarms := tpl.ResourceIDs("AWS::CloudWatch::Alarm")
	if len(alarms) < 5 {
		t.Errorf("%d alarms, want at least 5", len(alarms))
	}
	for _, id := range alarms {
		p := tpl.Resources[id].Properties
		if cfn.Scalar(p["Namespace"]) == "ddbpipe" {
			// The functions emit with exactly these dimensions (lambdafn.NewMetrics);
			// an alarm with other ones watches a metric that never has data.
			var dims []string
			fn := ""
			for _, d := range p["Dimensions"].([]any) {
				name := cfn.Scalar(d.(map[string]any)["Name"])
				dims = append(dims, name)
				if name == "Function" {
					fn = cfn.Scalar(d.(map[string]any)["Value"])
				}
			}
			if strings.Join(dims, ",") != "Function,Stack" {
				t.Errorf("%s: dimensions %v, want Function and Stack", id, dims)
			}
			// The Function dimension is the function that emits the metric.
			if name := cfn.Scalar(p["MetricName"]); !inv[fn][name] {
				t.Errorf("%s alarms on ddbpipe/%s with Function=%q; the functions that emit it: %v", id, name, fn, emitters(inv, name))
			}
		}
		if refs := cfn.Refs(p["AlarmActions"]); len(refs) != 1 || refs[0].Target != "AlarmTopic" {
			t.Errorf("%s: AlarmActions %v, want the AlarmTopic", id, p["AlarmActions"])
		}
	}

	ids := tpl.ResourceIDs("AWS::CloudWatch::Dashboard")
	if len(ids) != 1 {
		t.Fatalf("dashboards %v, want one", ids)
	}
	params, err := tpl.ParamValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfn.Context{Params: params, Names: placeholderNames{}, Pseudo: map[string]string{
		"AWS::Region": "us-east-1", "AWS::AccountId": "000000000000", "AWS::StackName": "ddbpipe",
		"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
	}}
	body, err := tpl.ResolveString(tpl.Resources[ids[0]].Properties["DashboardBody"], ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &dash); err != nil {
		t.Fatalf("dashboard body is not JSON: %v\n%s", err, body)
	}
	graphs := 0
	for _, w := range dash.Widgets {
		var prev []any // "." repeats the previous row's value at that position
		for _, m := range w.Properties.Metrics {
			if len(m) < 2 {
				t.Errorf("%s: metric %v has no name", w.Properties.Title, m)
				continue
			}
			row := append([]any(nil), m...)
			for i := range row {
				if row[i] == "." && i < len(prev) {
					row[i] = prev[i]
				}
			}
			prev = row
			namespace, _ := row[0].(string)
			name, _ := row[1].(string)
			graphs++
			if namespace != "ddbpipe" {
				continue
			}
			if len(row) < 6 || row[2] != "Function" || row[4] != "Stack" {
				t.Errorf("dashboard %q graphs ddbpipe/%s with dimensions %v, want Function and Stack", w.Properties.Title, name, m[2:])
				continue
			}
			if fn, _ := row[3].(string); !inv[fn][name] {
				t.Errorf("dashboard %q graphs ddbpipe/%s with Function=%q; the functions that emit it: %v", w.Properties.Title, name, fn, emitters(inv, name))
			}
		}
	}
	if graphs < 10 {
		t.Errorf("the dashboard graphs %d metrics, want at least 10", graphs)
	}
}
