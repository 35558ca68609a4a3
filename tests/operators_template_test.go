package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// emittedMetrics collects the names the functions' code may emit as EMF
// metrics: the quoted capitalised words in the non-test Go files of the
// packages that write EMF.
func emittedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	quoted := regexp.MustCompile(`"([A-Z][A-Za-z0-9]+)"`)
	words := map[string][]string{} // package folder → its quoted words
	usesEMF := map[string]bool{}
	root := repoRoot(t)
	for _, dir := range []string{"shared", "functions"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			pkg := filepath.Dir(path)
			usesEMF[pkg] = usesEMF[pkg] || strings.Contains(string(b), "emf.")
			for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
				words[pkg] = append(words[pkg], m[1])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]bool{}
	for pkg, ws := range words {
		for _, w := range ws {
			names[w] = names[w] || usesEMF[pkg]
		}
	}
	return names
}

// TestTemplateAlarmsAndDashboardNameEmittedMetrics: every alarm and
// dashboard graph on the ddbpipe namespace names a metric some function
// emits with that Function dimension's writer, so a renamed metric cannot
// leave an alarm that never fires; every alarm notifies the topic; the
// dashboard body is valid JSON once !Sub is resolved.
func TestTemplateAlarmsAndDashboardNameEmittedMetrics(t *testing.T) {
	tpl := mustTemplate(t)
	emitted := emittedMetrics(t)
	for _, must := range []string{"VotesAccepted", "RotationAlarms", "ChecksumFailures", "RecordsArchived"} {
		if !emitted[must] {
			t.Fatalf("the metric scan found no %s: it does not see the code's metrics", must)
		}
	}
	alarms := tpl.ResourceIDs("AWS::CloudWatch::Alarm")
	if len(alarms) < 5 {
		t.Errorf("%d alarms, want at least 5", len(alarms))
	}
	for _, id := range alarms {
		p := tpl.Resources[id].Properties
		if cfn.Scalar(p["Namespace"]) == "ddbpipe" {
			if !emitted[cfn.Scalar(p["MetricName"])] {
				t.Errorf("%s alarms on ddbpipe/%s, which no function emits", id, cfn.Scalar(p["MetricName"]))
			}
			// The functions emit with exactly these dimensions (functions.newMetrics);
			// an alarm with other ones watches a metric that never has data.
			var dims []string
			for _, d := range p["Dimensions"].([]any) {
				dims = append(dims, cfn.Scalar(d.(map[string]any)["Name"]))
			}
			if strings.Join(dims, ",") != "Function,Stack" {
				t.Errorf("%s: dimensions %v, want Function and Stack", id, dims)
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
		namespace := ""
		for _, m := range w.Properties.Metrics {
			if len(m) < 2 {
				t.Errorf("%s: metric %v has no name", w.Properties.Title, m)
				continue
			}
			if ns, _ := m[0].(string); ns != "." {
				namespace = ns
			}
			name, _ := m[1].(string)
			graphs++
			if namespace != "ddbpipe" {
				continue
			}
			if !emitted[name] {
				t.Errorf("dashboard %q graphs ddbpipe/%s, which no function emits", w.Properties.Title, name)
			}
			if len(m) < 6 || (m[2] != "Function" && m[2] != ".") || (m[4] != "Stack" && m[4] != ".") {
				t.Errorf("dashboard %q graphs ddbpipe/%s with dimensions %v, want Function and Stack", w.Properties.Title, name, m[2:])
			}
		}
	}
	if graphs < 10 {
		t.Errorf("the dashboard graphs %d metrics, want at least 10", graphs)
	}
}
