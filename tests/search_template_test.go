package tests

// Search on AWS (issue 37): the domain, the indexer, their grants and alarms,
// all behind SearchEnabled, read from template.yaml.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// liveNames resolves references like placeholderNames, but only to the
// resources a stack with these parameters creates: a reference to any other
// is an error, as CloudFormation refuses it.
type liveNames map[string]bool

func (n liveNames) Ref(id string) (string, error) {
	if !n[id] {
		return "", fmt.Errorf("!Ref %s: not created with these parameters", id)
	}
	return "ref-" + id, nil
}

func (n liveNames) GetAtt(id, attr string) (string, error) {
	if !n[id] {
		return "", fmt.Errorf("!GetAtt %s.%s: not created with these parameters", id, attr)
	}
	return "arn:aws:test:us-east-1:000000000000:" + id + "/" + attr, nil
}

// stackWith is what a deploy with these parameter overrides creates: its
// resources (by the resources' conditions) and a context that resolves
// references to those only.
func stackWith(t *testing.T, tpl *cfn.Template, overrides map[string]string) (liveNames, cfn.Context) {
	t.Helper()
	params, err := tpl.ParamValues(overrides)
	if err != nil {
		t.Fatal(err)
	}
	live := liveNames{}
	ctx := cfn.Context{Params: params, Names: live, Pseudo: map[string]string{
		"AWS::Region": "us-east-1", "AWS::AccountId": "000000000000", "AWS::StackName": "ddbpipe",
		"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
	}}
	for id, r := range tpl.Resources {
		on, err := tpl.ConditionTrue(r.Condition, ctx)
		if err != nil {
			t.Fatalf("%s: condition %s: %v", id, r.Condition, err)
		}
		live[id] = on
	}
	return live, ctx
}

// resolved is every created resource's properties and every output shown,
// resolved: a reference to a resource the stack does not create fails.
func resolved(t *testing.T, tpl *cfn.Template, live liveNames, ctx cfn.Context) map[string]any {
	t.Helper()
	out := map[string]any{}
	for id, r := range tpl.Resources {
		if !live[id] {
			continue
		}
		v, err := tpl.Resolve(r.Properties, ctx)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		out[id] = v
	}
	for name, o := range tpl.Outputs {
		on, err := tpl.ConditionTrue(o.Condition, ctx)
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		if !on {
			continue
		}
		v, err := tpl.Resolve(o.Value, ctx)
		if err != nil {
			t.Errorf("output %s: %v", name, err)
			continue
		}
		out["Outputs."+name] = v
	}
	return out
}

// searchResources are the template's resources of search: the ones named
// Search*. Each must be under a condition that turns off with search.
func searchResources(tpl *cfn.Template) []string {
	var out []string
	for id := range tpl.Resources {
		if strings.HasPrefix(id, "Search") {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// SearchEnabled=false removes the domain, the indexer, their log groups,
// roles and alarms, and nothing else; what stays names none of them and
// grants no search action; the objects API gets an empty SEARCH_ENDPOINT
// (it answers 503); the dashboard is still valid JSON and lists exactly the
// alarms that exist.
func TestTemplateSearchOffRemovesSearch(t *testing.T) {
	tpl := mustTemplate(t)
	if p := tpl.Parameters["SearchEnabled"]; cfn.Scalar(p.Default) != "true" {
		t.Errorf("SearchEnabled defaults to %v, want true", p.Default)
	}
	on, onCtx := stackWith(t, tpl, nil)
	off, offCtx := stackWith(t, tpl, map[string]string{"SearchEnabled": "false"})
	var removed []string
	for id := range tpl.Resources {
		if on[id] && !off[id] {
			removed = append(removed, id)
		}
	}
	sort.Strings(removed)
	want := searchResources(tpl)
	for _, must := range []string{"SearchDomain", "SearchIndexerFunction", "SearchIndexerFunctionRole", "SearchLagAlarm", "SearchClusterRedAlarm"} {
		if !slices.Contains(want, must) {
			t.Errorf("the template has no %s", must)
		}
	}
	// SearchKmsKeyAlarm exists only with KmsKeyArn too: off in both.
	want = slices.DeleteFunc(want, func(id string) bool { return id == "SearchKmsKeyAlarm" })
	if !slices.Equal(removed, want) {
		t.Errorf("SearchEnabled=false removes %v, want exactly the search resources %v", removed, want)
	}

	for name, c := range map[string]struct {
		live liveNames
		ctx  cfn.Context
	}{"on": {on, onCtx}, "off": {off, offCtx}} {
		t.Run("search "+name, func(t *testing.T) {
			res := resolved(t, tpl, c.live, c.ctx)
			env := asMap(asMap(asMap(res["ObjectsApiFunction"])["Environment"])["Variables"])
			endpoint := cfn.Scalar(env["SEARCH_ENDPOINT"])
			if name == "off" && endpoint != "" {
				t.Errorf("ObjectsApiFunction SEARCH_ENDPOINT = %q without search, want empty (the API answers 503)", endpoint)
			}
			if name == "on" && !strings.Contains(endpoint, "SearchDomain/DomainEndpoint") {
				t.Errorf("ObjectsApiFunction SEARCH_ENDPOINT = %q, want the domain's endpoint", endpoint)
			}
			if got := cfn.Scalar(env["SEARCH_INDEX"]); got != "ddbpipe-objects" {
				t.Errorf("ObjectsApiFunction SEARCH_INDEX = %q, want ddbpipe-objects", got)
			}
			if name == "off" {
				b, _ := json.Marshal(res)
				for _, s := range []string{`"es:`, "ddbpipe-search", "SearchDomain", "SearchIndexer"} {
					if strings.Contains(string(b), s) {
						t.Errorf("without search, a resource or output still holds %s", s)
					}
				}
			}
			// The dashboard: valid JSON, an alarm widget with every alarm
			// created, and only those.
			body := cfn.Scalar(asMap(res["Dashboard"])["DashboardBody"])
			var dash struct {
				Widgets []struct {
					Type       string `json:"type"`
					Properties struct {
						Alarms []string `json:"alarms"`
					} `json:"properties"`
				} `json:"widgets"`
			}
			if err := json.Unmarshal([]byte(body), &dash); err != nil {
				t.Fatalf("dashboard body is not JSON: %v\n%s", err, body)
			}
			var shown, alarms []string
			for _, w := range dash.Widgets {
				if w.Type == "alarm" {
					for _, a := range w.Properties.Alarms {
						shown = append(shown, a[strings.LastIndex(a, ":alarm:")+len(":alarm:"):])
					}
				}
			}
			for _, id := range tpl.ResourceIDs("AWS::CloudWatch::Alarm") {
				if c.live[id] {
					alarms = append(alarms, "ref-"+id)
				}
			}
			sort.Strings(shown)
			sort.Strings(alarms)
			if !slices.Equal(shown, alarms) {
				t.Errorf("the dashboard shows the alarms %v, want %v", shown, alarms)
			}
		})
	}
	// With KmsKeyArn, the KMS alarm joins the dashboard.
	kms, kmsCtx := stackWith(t, tpl, map[string]string{"KmsKeyArn": "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"})
	if !kms["SearchKmsKeyAlarm"] {
		t.Error("SearchKmsKeyAlarm does not exist with search and KmsKeyArn")
	}
	res := resolved(t, tpl, kms, kmsCtx)
	if body := cfn.Scalar(asMap(res["Dashboard"])["DashboardBody"]); !json.Valid([]byte(body)) || !strings.Contains(body, ":alarm:ref-SearchKmsKeyAlarm") {
		t.Errorf("with KmsKeyArn, the dashboard body is not JSON or does not show SearchKmsKeyAlarm")
	}
	if key := asMap(asMap(res["SearchDomain"])["EncryptionAtRestOptions"])["KmsKeyId"]; cfn.Scalar(key) != kmsCtx.Params["KmsKeyArn"] {
		t.Errorf("with KmsKeyArn, the domain's data at rest is encrypted with %v, want the key", key)
	}
}

// searchPaths is the domain's ARN prefix for paths in its policies.
const searchPaths = "arn:${AWS::Partition}:es:${AWS::Region}:${AWS::AccountId}:domain/${AWS::StackName}-search/"

// esGrants lists the es: grants of a policy document (conditional
// statements included) as "action path" pairs, the path after searchPaths.
func esGrants(t *testing.T, where string, doc any) []string {
	t.Helper()
	var out []string
	for _, st := range resourcesOf(asMap(doc)["Statement"]) {
		s := asMap(st)
		if args := asList(s["Fn::If"]); len(args) == 3 {
			if cfn.Scalar(args[0]) == "HasSearch" && refTarget(args[2]) == "AWS::NoValue" {
				s = asMap(args[1])
			} else {
				continue
			}
		}
		var actions []string
		for _, a := range stringsOf(s["Action"]) {
			if strings.HasPrefix(a, "es:") {
				actions = append(actions, a)
			}
		}
		if len(actions) == 0 {
			continue
		}
		if cfn.Scalar(s["Effect"]) != "Allow" {
			t.Errorf("%s: %s %v, want only Allow", where, cfn.Scalar(s["Effect"]), actions)
		}
		for _, r := range resourcesOf(s["Resource"]) {
			sub := cfn.Scalar(asMap(r)["Fn::Sub"])
			path, ok := strings.CutPrefix(sub, searchPaths)
			if !ok {
				t.Errorf("%s: %v on %v, want a path of the search domain (%s...)", where, actions, r, searchPaths)
				continue
			}
			for _, a := range actions {
				out = append(out, a+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// The domain: encrypted at rest and between nodes, HTTPS only with TLS 1.2,
// error logs kept, deleted with the stack (its index is rebuilt from the
// table); its access policy allows the indexer's and the objects API's roles
// only, each exactly on the paths its own role grants; the API only
// searches the alias, and the only domain-wide paths anyone gets are the
// writers' bulk, alias update and alias reads.
func TestTemplateSearchDomainHardened(t *testing.T) {
	tpl := mustTemplate(t)
	domains := tpl.ResourceIDs("AWS::OpenSearchService::Domain")
	if !slices.Equal(domains, []string{"SearchDomain"}) {
		t.Fatalf("OpenSearch domains %v, want SearchDomain", domains)
	}
	d := props(tpl, "SearchDomain")
	if cfn.Scalar(d["DomainName"]) != "${AWS::StackName}-search" && cfn.Scalar(asMap(d["DomainName"])["Fn::Sub"]) != "${AWS::StackName}-search" {
		t.Errorf("DomainName %v, want ${AWS::StackName}-search (the policies name its paths)", d["DomainName"])
	}
	for _, c := range []struct{ prop, key, want string }{
		{"EncryptionAtRestOptions", "Enabled", "true"},
		{"NodeToNodeEncryptionOptions", "Enabled", "true"},
		{"DomainEndpointOptions", "EnforceHTTPS", "true"},
		{"EBSOptions", "VolumeType", "gp3"},
	} {
		if got := cfn.Scalar(asMap(d[c.prop])[c.key]); got != c.want {
			t.Errorf("SearchDomain %s.%s = %q, want %q", c.prop, c.key, got, c.want)
		}
	}
	if tls := cfn.Scalar(asMap(d["DomainEndpointOptions"])["TLSSecurityPolicy"]); !strings.HasPrefix(tls, "Policy-Min-TLS-1-2") {
		t.Errorf("SearchDomain TLSSecurityPolicy %q, want TLS 1.2 at least", tls)
	}
	if d["VPCOptions"] != nil || d["AdvancedSecurityOptions"] != nil || d["CognitoOptions"] != nil {
		t.Error("SearchDomain: VPC, fine-grained access control or Cognito set: the template reasons them away (cfn-guard n/a), update the reasons")
	}
	logs := asMap(asMap(d["LogPublishingOptions"])["ES_APPLICATION_LOGS"])
	if cfn.Scalar(logs["Enabled"]) != "true" || refTarget(logs["CloudWatchLogsLogGroupArn"]) != "SearchLogGroup" {
		t.Errorf("SearchDomain error logs %v, want enabled into SearchLogGroup", logs)
	}
	if got := deletionPolicies(t)["SearchDomain"]; got != [2]string{"Delete", "Delete"} {
		t.Errorf("SearchDomain DeletionPolicy, UpdateReplacePolicy = %v, want Delete, Delete (derived data: search reindex rebuilds it)", got)
	}

	// The domain's access policy, statement by statement: one principal,
	// one of the two roles, and what it may do.
	byRole := map[string][]string{}
	for _, st := range resourcesOf(asMap(d["AccessPolicies"])["Statement"]) {
		s := asMap(st)
		principal := asMap(s["Principal"])
		refs := cfn.Refs(principal["AWS"])
		if len(principal) != 1 || len(refs) != 1 || refs[0].Attr != "Arn" || cfn.Scalar(s["Effect"]) != "Allow" || s["Condition"] != nil {
			t.Errorf("SearchDomain access policy: statement %v, want an Allow to one role of the template, unconditioned", s)
			continue
		}
		role := refs[0].Target
		doc := map[string]any{"Statement": []any{s}}
		byRole[role] = append(byRole[role], esGrants(t, "SearchDomain access policy", doc)...)
	}
	var roles []string
	for r := range byRole {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	if want := []string{"ObjectsApiFunctionRole", "SearchIndexerFunctionRole"}; !slices.Equal(roles, want) {
		t.Errorf("the domain's access policy names %v, want exactly %v", roles, want)
	}
	docs := policyDocuments(tpl)
	for _, role := range roles {
		var granted []string
		for _, doc := range docs[role] {
			granted = append(granted, esGrants(t, role, doc)...)
		}
		sort.Strings(granted)
		sort.Strings(byRole[role])
		if !slices.Equal(granted, byRole[role]) {
			t.Errorf("%s grants %v on the domain, its access policy allows it %v: keep them equal", role, granted, byRole[role])
		}
	}
	// The client searches with POST (opensearch-go's SearchReq), so no one
	// is granted GET on _search.
	if want := []string{"es:ESHttpPost ${AWS::StackName}-objects/_search"}; !slices.Equal(byRole["ObjectsApiFunctionRole"], want) {
		t.Errorf("the objects API may %v, want only searches of the alias: %v", byRole["ObjectsApiFunctionRole"], want)
	}

	// Every es: grant of the template is on the objects' indexes and
	// aliases (<stack>-objects...); the writers (the indexer, the
	// operator's reindex) also get the three domain-wide paths their
	// requests need, each with its one method, and no one gets the whole
	// domain.
	writers := map[string]bool{"SearchIndexerFunctionRole": true, "OperatorPolicy": true}
	domainWide := map[string]bool{"es:ESHttpPost _bulk": true, "es:ESHttpPost _aliases": true, "es:ESHttpGet _alias/${AWS::StackName}-objects*": true}
	for id, list := range docs {
		for _, doc := range list {
			for _, g := range esGrants(t, id, doc) {
				_, path, _ := strings.Cut(g, " ")
				switch {
				case strings.HasSuffix(path, "/_search") && g != "es:ESHttpPost "+path:
					t.Errorf("%s: %s, but searches are POSTs", id, g)
				case strings.HasPrefix(path, "${AWS::StackName}-objects"):
				case writers[id] && domainWide[g]:
				default:
					t.Errorf("%s: %s, beyond the objects' indexes", id, g)
				}
			}
		}
	}
}
