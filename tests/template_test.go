package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

// placeholderNames resolves resource references to recognisable strings,
// enough to check a template without provisioning it.
type placeholderNames struct{}

func (placeholderNames) Ref(id string) (string, error) { return "ref-" + id, nil }
func (placeholderNames) GetAtt(id, attr string) (string, error) {
	return "arn:aws:test:us-east-1:000000000000:" + id + "/" + attr, nil
}

func mustTemplate(tb testing.TB) *cfn.Template {
	tb.Helper()
	t, err := cfn.ParseFile(filepath.Join(repoRoot(tb), "template.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

func TestTemplateReferencesResolve(t *testing.T) {
	tpl := mustTemplate(t)
	if err := tpl.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.DependencyOrder(); err != nil {
		t.Fatal(err)
	}
}

func TestTemplateEventSourcesWithinLimits(t *testing.T) {
	tpl := mustTemplate(t)
	params, err := tpl.ParamValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfn.Context{Params: params, Names: placeholderNames{}, Pseudo: map[string]string{
		"AWS::Region": "us-east-1", "AWS::AccountId": "000000000000", "AWS::StackName": "ddbpipe",
		"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
	}}
	for _, err := range tpl.CheckLimits(ctx) {
		t.Error(err)
	}
}

func TestTemplateGlobals(t *testing.T) {
	tpl := mustTemplate(t)
	for _, f := range tpl.Functions() {
		for prop, want := range map[string]string{"Runtime": "provided.al2023", "Handler": "bootstrap"} {
			if got := cfn.Scalar(f.Properties[prop]); got != want {
				t.Errorf("%s %s = %q, want %q", f.LogicalID, prop, got, want)
			}
		}
		if arch, _ := f.Properties["Architectures"].([]any); len(arch) != 1 || arch[0] != "arm64" {
			t.Errorf("%s Architectures = %v, want [arm64]", f.LogicalID, f.Properties["Architectures"])
		}
		lc, _ := f.Properties["LoggingConfig"].(map[string]any)
		if lc["LogFormat"] != "JSON" {
			t.Errorf("%s LoggingConfig.LogFormat = %v, want JSON", f.LogicalID, lc["LogFormat"])
		}
		if f.Metadata["BuildMethod"] != "makefile" {
			t.Errorf("%s Metadata.BuildMethod = %v, want makefile (the Makefile's build-%%Function rule)", f.LogicalID, f.Metadata["BuildMethod"])
		}
		// Each function runs with a role of its own, written in the
		// template: a role SAM generates gets AWS managed policies that
		// grant on "*" (tests/iam_template_test.go reads the transform).
		role := refTarget(f.Properties["Role"])
		if r, ok := tpl.Resources[role]; !ok || r.Type != "AWS::IAM::Role" || len(cfn.Refs(f.Properties["Role"])) != 1 || cfn.Refs(f.Properties["Role"])[0].Attr != "Arn" {
			t.Errorf("%s Role = %v, want !GetAtt of an AWS::IAM::Role of the template", f.LogicalID, f.Properties["Role"])
		} else if len(asList(r.Properties["Policies"])) == 0 {
			t.Errorf("%s: its role %s has no Policies", f.LogicalID, role)
		}
		if f.Properties["Policies"] != nil {
			t.Errorf("%s has Policies beside its Role: SAM ignores them; put them in the role", f.LogicalID)
		}
	}
}

// Every template function has a main package and a Setup, and every
// function folder is in the template.
func TestTemplateFunctionsMatchCode(t *testing.T) {
	tpl := mustTemplate(t)
	root := repoRoot(t)
	inTemplate := map[string]bool{}
	for _, f := range tpl.Functions() {
		inTemplate[f.LogicalID] = true
		if _, err := os.Stat(filepath.Join(root, f.Dir(), "main.go")); err != nil {
			t.Errorf("%s: %s/main.go: %v", f.LogicalID, f.Dir(), err)
		}
		if registry.All[f.LogicalID] == nil {
			t.Errorf("%s has no Setup in registry.All", f.LogicalID)
		}
	}
	for id := range registry.All {
		if !inTemplate[id] {
			t.Errorf("registry.All has %s, which template.yaml does not declare", id)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	for _, d := range dirs {
		name := filepath.Base(filepath.Dir(d))
		found := false
		for id := range inTemplate {
			found = found || cfn.FunctionName(id) == name
		}
		if !found {
			t.Errorf("functions/%s is not a function of template.yaml", name)
		}
	}
}

// Every function cross-compiles the way `make build` and `sam build` do.
// The binaries go to the machine's ddbpipe cache (servers.CacheDir), where
// go build leaves one that is up to date with its sources as it is
// (linking the ten took 13 s of CPU, each time, into a new folder).
func TestFunctionsBuildForLambda(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cross-compiles every function")
	}
	tpl := mustTemplate(t)
	var pkgs []string
	for _, f := range tpl.Functions() {
		pkgs = append(pkgs, "./"+f.Dir())
	}
	sort.Strings(pkgs)
	cache, err := servers.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(cache, "lambda-build")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"build", "-tags", "lambda.norpc", "-o", out + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
}

// The tally's checkpoints expire: the counters table's TTL is on, on the
// attribute the checkpoints carry.
func TestCountersTableExpiresCheckpoints(t *testing.T) {
	ttl, _ := mustTemplate(t).Resources["CountersTable"].Properties["TimeToLiveSpecification"].(map[string]any)
	if cfn.Scalar(ttl["AttributeName"]) != votesddb.TTLAttribute || cfn.Scalar(ttl["Enabled"]) != "true" {
		t.Errorf("CountersTable TimeToLiveSpecification %v, want %q enabled", ttl, votesddb.TTLAttribute)
	}
}

// The polls index the counters table declares is the one votesddb queries.
func TestCountersPollsIndexAgrees(t *testing.T) {
	gsis, _ := mustTemplate(t).Resources["CountersTable"].Properties["GlobalSecondaryIndexes"].([]any)
	for _, g := range gsis {
		m, _ := g.(map[string]any)
		if cfn.Scalar(m["IndexName"]) != votesddb.PollsIndex {
			continue
		}
		var keys []string
		for _, k := range m["KeySchema"].([]any) {
			km := k.(map[string]any)
			keys = append(keys, cfn.Scalar(km["AttributeName"])+" "+cfn.Scalar(km["KeyType"]))
		}
		proj, _ := m["Projection"].(map[string]any)
		if fmt.Sprint(keys) != "[pollCatalog HASH pollId RANGE]" || cfn.Scalar(proj["ProjectionType"]) != "ALL" {
			t.Errorf("index keys %v, projection %v; want [pollCatalog HASH pollId RANGE], ALL", keys, proj)
		}
		return
	}
	t.Fatalf("CountersTable has no index %q", votesddb.PollsIndex)
}

// The listing index the objects table declares is the one objectsddb
// queries: its name, keys and projection; and both functions that commit
// versions know N.
func TestObjectsListingIndexAgrees(t *testing.T) {
	tpl := mustTemplate(t)
	var gsi map[string]any
	gsis, _ := tpl.Resources["ObjectsTable"].Properties["GlobalSecondaryIndexes"].([]any)
	for _, g := range gsis {
		if m, _ := g.(map[string]any); cfn.Scalar(m["IndexName"]) == objectsddb.IndexName {
			gsi = m
		}
	}
	if gsi == nil {
		t.Fatalf("ObjectsTable has no index %q", objectsddb.IndexName)
	}
	var keys []string
	for _, k := range gsi["KeySchema"].([]any) {
		m := k.(map[string]any)
		keys = append(keys, cfn.Scalar(m["AttributeName"])+" "+cfn.Scalar(m["KeyType"]))
	}
	proj := gsi["Projection"].(map[string]any)
	var attrs []string
	for _, a := range proj["NonKeyAttributes"].([]any) {
		attrs = append(attrs, cfn.Scalar(a))
	}
	if fmt.Sprint(keys) != "[listShard HASH pk RANGE]" || cfn.Scalar(proj["ProjectionType"]) != "INCLUDE" || fmt.Sprint(attrs) != fmt.Sprint(objectsddb.IndexProjection) {
		t.Errorf("index keys %v, projection %v %v; want [listShard HASH pk RANGE], INCLUDE %v", keys, proj["ProjectionType"], attrs, objectsddb.IndexProjection)
	}
	for _, fn := range []string{"ObjectsApiFunction", "ObjectsFinalizeFunction"} {
		env, _ := tpl.Resources[fn].Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if refTarget(vars["INDEX_SHARDS"]) != "ObjectsIndexShards" {
			t.Errorf("%s: INDEX_SHARDS is %v, want !Ref ObjectsIndexShards", fn, vars["INDEX_SHARDS"])
		}
	}
}
