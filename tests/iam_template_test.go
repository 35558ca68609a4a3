package tests

// Least privilege as AWS evaluates it: the SAM-transformed template (what
// `sam deploy` creates), not template.yaml, because SAM adds roles, policies
// and AWS managed policies of its own to the functions it transforms.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// starActions are the only actions allowed on Resource "*": they have no
// resource-level permissions (IAM's service authorization reference lists no
// resource type for them). CreateEventSourceMapping is narrowed by a
// condition instead (needsCondition).
var starActions = map[string]bool{
	"xray:PutTraceSegments":           true,
	"xray:PutTelemetryRecords":        true,
	"dynamodb:ListStreams":            true,
	"dynamodb:ListTables":             true,
	"lambda:ListEventSourceMappings":  true,
	"lambda:CreateEventSourceMapping": true,
	"cloudwatch:PutMetricData":        true,
}

// needsCondition: allowed on "*" only with a Condition that narrows it.
var needsCondition = map[string]bool{"lambda:CreateEventSourceMapping": true}

// transformed is the SAM-transformed template, parsed: iam.Transformed's,
// the one the local stacks' IAM judges read (tools/cfncheck/transform.py,
// as make lint runs it, cached per template). Without Python and
// aws-sam-translator the test skips, or fails under
// DDBPIPE_REQUIRE_STACK=1 (make test).
func transformed(t *testing.T) map[string]map[string]any {
	t.Helper()
	cache, err := stack.TransformCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	out, err := iam.Transformed(t.Context(), root, filepath.Join(root, "template.yaml"), cache)
	if err != nil {
		python := os.Getenv("PYTHON")
		if python == "" {
			python = "python3"
		}
		if probe := exec.Command(python, "-c", "import samtranslator, boto3"); probe.Run() != nil && os.Getenv("DDBPIPE_REQUIRE_STACK") != "1" {
			t.Skipf("the SAM transform needs %s with aws-sam-translator and boto3 (pip install aws-sam-translator boto3)", python)
		}
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]map[string]any
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Resources
}

func resProps(r map[string]any) map[string]any { return asMap(r["Properties"]) }

// stringsOf is a string or a list of strings as a list.
func stringsOf(v any) []string {
	if l, ok := v.([]any); ok {
		var out []string
		for _, e := range l {
			out = append(out, cfn.Scalar(e))
		}
		return out
	}
	if v == nil {
		return nil
	}
	return []string{cfn.Scalar(v)}
}

// resourcesOf is a statement's Resource as a list.
func resourcesOf(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// iamStatement is one statement and where it is.
type iamStatement struct {
	where string
	s     map[string]any
}

func documentStatements(where string, doc any) []iamStatement {
	var out []iamStatement
	for _, st := range resourcesOf(asMap(doc)["Statement"]) {
		out = append(out, iamStatement{where, asMap(st)})
	}
	return out
}

// roleStatements are the statements a role's principal gets from the
// template: its inline policies, the AWS::IAM::Policy and customer managed
// policies attached to it. AWS managed policies are returned apart.
func roleStatements(res map[string]map[string]any, role string) (sts []iamStatement, awsManaged []string) {
	p := resProps(res[role])
	for _, pol := range asList(p["Policies"]) {
		pm := asMap(pol)
		sts = append(sts, documentStatements(role+"/"+cfn.Scalar(pm["PolicyName"]), pm["PolicyDocument"])...)
	}
	for _, arn := range asList(p["ManagedPolicyArns"]) {
		if id := refTarget(arn); id != "" && res[id] != nil {
			sts = append(sts, documentStatements(id, resProps(res[id])["PolicyDocument"])...)
			continue
		}
		awsManaged = append(awsManaged, fmt.Sprint(arn))
	}
	for id, r := range res {
		if r["Type"] != "AWS::IAM::Policy" && r["Type"] != "AWS::IAM::ManagedPolicy" {
			continue
		}
		for _, ref := range asList(resProps(r)["Roles"]) {
			if refTarget(ref) == role {
				sts = append(sts, documentStatements(id, resProps(r)["PolicyDocument"])...)
			}
		}
	}
	return sts, awsManaged
}

// grants reports whether an Allow statement gives action on a resource that
// names target (a !Ref, !GetAtt or ${} of that logical id, with attr when
// attr is not empty).
func grants(sts []iamStatement, action, target, attr string) bool {
	for _, st := range sts {
		if cfn.Scalar(st.s["Effect"]) != "Allow" || !slices.Contains(stringsOf(st.s["Action"]), action) {
			continue
		}
		for _, r := range resourcesOf(st.s["Resource"]) {
			for _, ref := range cfn.Refs(r) {
				if ref.Target == target && (attr == "" || ref.Attr == attr) {
					return true
				}
			}
		}
	}
	return false
}

func grantsOnStar(sts []iamStatement, action string) bool {
	for _, st := range sts {
		if cfn.Scalar(st.s["Effect"]) == "Allow" && slices.Contains(stringsOf(st.s["Action"]), action) &&
			slices.Contains(stringsOf(st.s["Resource"]), "*") {
			return true
		}
	}
	return false
}

// checkStatement reports a statement's wildcard actions, NotAction and
// NotResource, and "*" resources for actions that have resource-level
// permissions.
func checkStatement(t *testing.T, st iamStatement) {
	t.Helper()
	s := st.s
	if cfn.Scalar(s["Effect"]) != "Allow" {
		return
	}
	for _, k := range []string{"NotAction", "NotResource"} {
		if s[k] != nil {
			t.Errorf("%s: Allow with %s grants everything else", st.where, k)
		}
	}
	star := false
	for _, r := range resourcesOf(s["Resource"]) {
		if cfn.Scalar(r) == "*" {
			star = true
		}
	}
	for _, a := range stringsOf(s["Action"]) {
		if strings.Contains(a, "*") || strings.Contains(a, "?") {
			t.Errorf("%s: wildcard action %q", st.where, a)
		}
		if star && !starActions[a] {
			t.Errorf("%s: %s on Resource \"*\", but it has resource-level permissions", st.where, a)
		}
		if star && needsCondition[a] && s["Condition"] == nil {
			t.Errorf("%s: %s on Resource \"*\" without a Condition", st.where, a)
		}
	}
}

// Every function of the deployed stack runs with a role of the template, its
// own, with no AWS managed policy (those grant on "*": logs, X-Ray, the
// event sources' reads), no wildcard action and "*" only where IAM has no
// resource-level permission; its logs go only to its own log group, and its
// event sources and failure destinations are granted on exactly their queue
// or stream.
func TestTransformedFunctionsLeastPrivilege(t *testing.T) {
	t.Parallel()
	res := transformed(t)
	var fns []string
	for id, r := range res {
		if r["Type"] == "AWS::Lambda::Function" {
			fns = append(fns, id)
		}
	}
	sort.Strings(fns)
	if len(fns) == 0 {
		t.Fatal("no AWS::Lambda::Function in the transformed template")
	}
	roleOf := map[string]string{}
	usedBy := map[string][]string{}
	for _, fn := range fns {
		role := refTarget(resProps(res[fn])["Role"])
		if role == "" || res[role]["Type"] != "AWS::IAM::Role" {
			t.Errorf("%s: Role %v is not a role of the template", fn, resProps(res[fn])["Role"])
			continue
		}
		roleOf[fn] = role
		usedBy[role] = append(usedBy[role], fn)
	}
	for role, users := range usedBy {
		if len(users) > 1 {
			t.Errorf("role %s is shared by %v: each function gets its own", role, users)
		}
	}
	for _, fn := range fns {
		role, ok := roleOf[fn]
		if !ok {
			continue
		}
		sts, managed := roleStatements(res, role)
		for _, arn := range managed {
			t.Errorf("%s: role %s has the managed policy %s (not in the template, so not scoped to it)", fn, role, arn)
		}
		for _, st := range sts {
			checkStatement(t, st)
		}
		trust := documentStatements(role, resProps(res[role])["AssumeRolePolicyDocument"])
		for _, st := range trust {
			if p := stringsOf(asMap(st.s["Principal"])["Service"]); !slices.Equal(p, []string{"lambda.amazonaws.com"}) {
				t.Errorf("%s: role %s is assumable by %v, want only lambda.amazonaws.com", fn, role, st.s["Principal"])
			}
		}

		// Logs: only to the function's own log group.
		lg := refTarget(asMap(resProps(res[fn])["LoggingConfig"])["LogGroup"])
		for _, a := range []string{"logs:CreateLogStream", "logs:PutLogEvents"} {
			if lg == "" || !grants(sts, a, lg, "") {
				t.Errorf("%s: %s not granted on its log group %q", fn, a, lg)
			}
		}
		for _, st := range sts {
			for _, a := range stringsOf(st.s["Action"]) {
				if !strings.HasPrefix(a, "logs:") {
					continue
				}
				for _, r := range resourcesOf(st.s["Resource"]) {
					if refTarget(r) != lg {
						t.Errorf("%s: %s on %v, not only its log group %s", st.where, a, r, lg)
					}
				}
			}
		}
		// Tracing: Lambda sends the segments with the function's role.
		if mode := asMap(resProps(res[fn])["TracingConfig"])["Mode"]; mode != nil {
			for _, a := range []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"} {
				if !grantsOnStar(sts, a) {
					t.Errorf("%s: traced, but %s is not granted", fn, a)
				}
			}
		}
	}

	// Event source mappings read with the function's role, and send what
	// they give up on with it.
	for id, r := range res {
		if r["Type"] != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		p := resProps(r)
		fn := refTarget(p["FunctionName"])
		role, ok := roleOf[fn]
		if !ok {
			t.Errorf("%s: function %v has no role of the template", id, p["FunctionName"])
			continue
		}
		sts, _ := roleStatements(res, role)
		src := cfn.Refs(p["EventSourceArn"])
		if len(src) != 1 {
			t.Errorf("%s: EventSourceArn %v is not one resource of the template", id, p["EventSourceArn"])
			continue
		}
		var need []string
		switch res[src[0].Target]["Type"] {
		case "AWS::SQS::Queue":
			need = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
		case "AWS::DynamoDB::Table":
			need = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
			if !grantsOnStar(sts, "dynamodb:ListStreams") {
				t.Errorf("%s: %s's role lacks dynamodb:ListStreams (Resource \"*\")", id, fn)
			}
		default:
			t.Errorf("%s: event source %s of an unexpected type", id, src[0].Target)
		}
		for _, a := range need {
			if !grants(sts, a, src[0].Target, src[0].Attr) {
				t.Errorf("%s: %s's role lacks %s on %s", id, fn, a, src[0].Target)
			}
		}
		if dest := asMap(asMap(asMap(p["DestinationConfig"])["OnFailure"])["Destination"]); dest != nil {
			if q := refTarget(dest); q == "" || !grants(sts, "sqs:SendMessage", q, "") {
				t.Errorf("%s: %s's role cannot send to its on-failure destination %v", id, fn, dest)
			}
		}
	}
	// Asynchronous invocations' on-failure destinations, likewise.
	for id, r := range res {
		if r["Type"] != "AWS::Lambda::EventInvokeConfig" {
			continue
		}
		p := resProps(r)
		fn := refTarget(p["FunctionName"])
		dest := asMap(asMap(p["DestinationConfig"])["OnFailure"])["Destination"]
		if dest == nil {
			continue
		}
		role, ok := roleOf[fn]
		if q := refTarget(dest); !ok || q == "" {
			t.Errorf("%s: destination %v of %v not checkable", id, dest, p["FunctionName"])
		} else if sts, _ := roleStatements(res, role); !grants(sts, "sqs:SendMessage", q, "") {
			t.Errorf("%s: %s's role cannot send to its on-failure destination %s", id, fn, q)
		}
	}
}

// Every other policy of the transformed template (callers' managed
// policies, roles of no function) obeys the same statement rules.
func TestTransformedPoliciesLeastPrivilege(t *testing.T) {
	t.Parallel()
	res := transformed(t)
	for id, r := range res {
		p := resProps(r)
		switch r["Type"] {
		case "AWS::IAM::ManagedPolicy", "AWS::IAM::Policy":
			for _, st := range documentStatements(id, p["PolicyDocument"]) {
				checkStatement(t, st)
			}
		case "AWS::IAM::Role":
			for _, arn := range asList(p["ManagedPolicyArns"]) {
				if refTarget(arn) == "" {
					t.Errorf("%s: managed policy %v is not one of the template", id, arn)
				}
			}
			for _, pol := range asList(p["Policies"]) {
				for _, st := range documentStatements(id, asMap(pol)["PolicyDocument"]) {
					checkStatement(t, st)
				}
			}
		}
	}
}

// iamGlob reports whether an IAM resource pattern (* and ? wildcards, which
// cross "/") matches s.
func iamGlob(pattern, s string) bool {
	var re strings.Builder
	re.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(s)
}

// invokeResources are the "METHOD/path" parts of a managed policy's
// execute-api:Invoke resources on this API's $default stage.
func invokeResources(t *testing.T, tpl *cfn.Template, id string) []string {
	t.Helper()
	r, ok := tpl.Resources[id]
	if !ok || r.Type != "AWS::IAM::ManagedPolicy" {
		t.Fatalf("%s: no AWS::IAM::ManagedPolicy", id)
	}
	const prefix = "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${HttpApi}/$default/"
	var out []string
	for _, st := range asList(asMap(r.Properties["PolicyDocument"])["Statement"]) {
		s := asMap(st)
		if !slices.Equal(stringsOf(s["Action"]), []string{"execute-api:Invoke"}) || cfn.Scalar(s["Effect"]) != "Allow" {
			t.Errorf("%s: statement %v, want only Allow execute-api:Invoke", id, s)
			continue
		}
		for _, res := range resourcesOf(s["Resource"]) {
			sub := cfn.Scalar(asMap(res)["Fn::Sub"])
			rest, ok := strings.CutPrefix(sub, prefix)
			method, _, _ := strings.Cut(rest, "/")
			if !ok || method == "" || strings.ContainsAny(method, "*?") {
				t.Errorf("%s: resource %v is not one method of this API's $default stage (%sMETHOD/path)", id, res, prefix)
				continue
			}
			out = append(out, rest)
		}
	}
	return out
}

// Callers' permission: ApiInvokePolicy lets a caller invoke every signed
// route of the API, and nothing else (not /health, which is public, nor any
// other API or stage); ApiReadPolicy only the GET and HEAD ones. Both are
// outputs, for operators to attach.
func TestTemplateApiInvokePolicies(t *testing.T) {
	tpl := mustTemplate(t)
	type route struct{ method, path string }
	var signed []route
	for _, f := range tpl.Functions() {
		for _, ev := range asMap(f.Properties["Events"]) {
			e := asMap(ev)
			if cfn.Scalar(e["Type"]) != "HttpApi" {
				continue
			}
			p := asMap(e["Properties"])
			if cfn.Scalar(asMap(p["Auth"])["Authorizer"]) == "NONE" {
				continue
			}
			// A request path of the route: {x} one segment, {x+} several.
			path := regexp.MustCompile(`\{[^}]+\+\}`).ReplaceAllString(cfn.Scalar(p["Path"]), "a/b")
			path = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
			methods := []string{cfn.Scalar(p["Method"])}
			if methods[0] == "ANY" {
				methods = []string{"GET", "HEAD", "PUT", "POST", "DELETE"}
			}
			for _, m := range methods {
				signed = append(signed, route{m, path})
			}
		}
	}
	if len(signed) == 0 {
		t.Fatal("no signed HttpApi route in the template")
	}
	allows := func(res []string, r route) bool {
		for _, p := range res {
			if iamGlob(p, r.method+r.path) {
				return true
			}
		}
		return false
	}
	all := invokeResources(t, tpl, "ApiInvokePolicy")
	read := invokeResources(t, tpl, "ApiReadPolicy")
	for _, r := range signed {
		if !allows(all, r) {
			t.Errorf("ApiInvokePolicy does not allow %s %s", r.method, r.path)
		}
		if isRead := r.method == "GET" || r.method == "HEAD"; allows(read, r) != isRead {
			t.Errorf("ApiReadPolicy allows %s %s: %v, want %v", r.method, r.path, !isRead, isRead)
		}
	}
	for _, res := range append(slices.Clone(all), read...) {
		if iamGlob(res, "GET/health") {
			t.Errorf("%s covers GET /health, which is public", res)
		}
	}
	for _, out := range []string{"ApiInvokePolicyArn", "ApiReadPolicyArn"} {
		if o, ok := tpl.Outputs[out]; !ok || refTarget(o.Value) != strings.TrimSuffix(out, "Arn") {
			t.Errorf("output %s: %v, want !Ref %s", out, o, strings.TrimSuffix(out, "Arn"))
		}
	}
}

// Concurrency caps where they protect something, and only there: the
// counter's event source (the counters table and ledger), the rotator and the
// sweeper at 1 (runs never overlap) unless ReserveConcurrency is off; none on
// the API functions, whose stage is throttled.
func TestTemplateConcurrencyCaps(t *testing.T) {
	tpl := mustTemplate(t)
	reserved := map[string]bool{"RotatorFunction": true, "ObjectsSweeperFunction": true}
	for _, f := range tpl.Functions() {
		rc := f.Properties["ReservedConcurrentExecutions"]
		if !reserved[f.LogicalID] {
			if rc != nil {
				t.Errorf("%s: ReservedConcurrentExecutions %v; only the rotator and the sweeper are reserved", f.LogicalID, rc)
			}
			continue
		}
		args := asList(asMap(rc)["Fn::If"])
		if len(args) != 3 || cfn.Scalar(args[0]) != "ReservesConcurrency" || cfn.Scalar(args[1]) != "1" || refTarget(args[2]) != "AWS::NoValue" {
			t.Errorf("%s: ReservedConcurrentExecutions %v, want !If [ReservesConcurrency, 1, !Ref AWS::NoValue]", f.LogicalID, rc)
		}
	}
	if p := tpl.Parameters["ReserveConcurrency"]; cfn.Scalar(p.Default) != "true" {
		t.Errorf("ReserveConcurrency defaults to %v, want true", p.Default)
	}
	counter, err := tpl.Function("CounterFunction")
	if err != nil {
		t.Fatal(err)
	}
	p := asMap(asMap(asMap(counter.Properties["Events"])["Votes"])["Properties"])
	if refTarget(asMap(p["ScalingConfig"])["MaximumConcurrency"]) != "CounterMaxConcurrency" {
		t.Errorf("CounterFunction's Votes event: ScalingConfig %v, want MaximumConcurrency: !Ref CounterMaxConcurrency", p["ScalingConfig"])
	}
}

// policyDocuments are the policy documents of the template's roles and
// managed policies, by the resource's logical id.
func policyDocuments(tpl *cfn.Template) map[string][]any {
	out := map[string][]any{}
	for id, r := range tpl.Resources {
		switch r.Type {
		case "AWS::IAM::ManagedPolicy":
			out[id] = append(out[id], r.Properties["PolicyDocument"])
		case "AWS::IAM::Role":
			for _, p := range asList(r.Properties["Policies"]) {
				out[id] = append(out[id], asMap(p)["PolicyDocument"])
			}
		}
	}
	return out
}

// The callers who call AWS directly have a managed policy each, output for
// them to attach: producers (send votes, read the poll), operators (the
// runbook) and analysts (SQL over the archive).
func TestTemplateCallerPolicies(t *testing.T) {
	tpl := mustTemplate(t)
	docs := policyDocuments(tpl)
	grants := func(id, action, target string) bool {
		for _, doc := range docs[id] {
			for _, st := range resourcesOf(asMap(doc)["Statement"]) {
				s := asMap(st)
				if cfn.Scalar(s["Effect"]) != "Allow" || !slices.Contains(stringsOf(s["Action"]), action) {
					continue
				}
				for _, r := range resourcesOf(s["Resource"]) {
					for _, ref := range cfn.Refs(r) {
						if ref.Target == target {
							return true
						}
					}
				}
			}
		}
		return false
	}
	for _, c := range []struct{ policy, action, on string }{
		{"ProducerPolicy", "sqs:SendMessage", "VotesQueue"},
		{"ProducerPolicy", "sqs:GetQueueAttributes", "VotesQueue"}, // the producer reads them before sending
		{"ProducerPolicy", "dynamodb:GetItem", "CountersTable"},
		{"OperatorPolicy", "sqs:ReceiveMessage", "VotesDeadLetterQueue"},
		{"OperatorPolicy", "sqs:DeleteMessage", "VotesDeadLetterQueue"},
		{"OperatorPolicy", "sqs:SendMessage", "VotesQueue"},
		{"OperatorPolicy", "sqs:ReceiveMessage", "VotesRejectsQueue"},
		{"OperatorPolicy", "sqs:ReceiveMessage", "StreamFailuresQueue"},
		{"OperatorPolicy", "dynamodb:PutItem", "CountersTable"},
		{"OperatorPolicy", "s3:ListBucket", "ArchiveBucket"},
		{"AnalystPolicy", "s3:GetObject", "ArchiveBucket"},
		{"AnalystPolicy", "athena:StartQueryExecution", "ArchiveWorkGroup"},
		{"AnalystPolicy", "glue:GetTable", "ArchiveDatabase"},
		{"AnalystPolicy", "s3:PutObject", "AthenaResultsBucket"},
	} {
		if !grants(c.policy, c.action, c.on) {
			t.Errorf("%s does not allow %s on %s", c.policy, c.action, c.on)
		}
	}
	for _, p := range []string{"ProducerPolicy", "OperatorPolicy", "AnalystPolicy"} {
		if o, ok := tpl.Outputs[p+"Arn"]; !ok || refTarget(o.Value) != p {
			t.Errorf("output %sArn: %v, want !Ref %s", p, o, p)
		}
	}
	// Nothing a producer or an analyst may change beyond its job.
	for _, forbidden := range []struct{ policy, action string }{
		{"ProducerPolicy", "sqs:DeleteMessage"}, {"ProducerPolicy", "dynamodb:PutItem"},
		{"AnalystPolicy", "s3:DeleteObject"}, {"AnalystPolicy", "dynamodb:Scan"},
	} {
		for _, doc := range docs[forbidden.policy] {
			for _, st := range resourcesOf(asMap(doc)["Statement"]) {
				if slices.Contains(stringsOf(asMap(st)["Action"]), forbidden.action) {
					t.Errorf("%s allows %s", forbidden.policy, forbidden.action)
				}
			}
		}
	}
}

// With KmsKeyArn set the buckets are SSE-KMS, and S3 calls KMS with the
// caller's credentials: every role or policy that writes objects to one of
// them gets kms:GenerateDataKey, every one that reads them kms:Decrypt, on
// the key only, through S3 only, and only when the key is set.
func TestTemplateKMSGrants(t *testing.T) {
	tpl := mustTemplate(t)
	buckets := map[string]bool{}
	for id, r := range tpl.Resources {
		if r.Type != "AWS::S3::Bucket" {
			continue
		}
		for _, rule := range asList(asMap(r.Properties["BucketEncryption"])["ServerSideEncryptionConfiguration"]) {
			if strings.Contains(fmt.Sprint(asMap(rule)["ServerSideEncryptionByDefault"]), "KmsKeyArn") {
				buckets[id] = true
			}
		}
	}
	if !buckets["ObjectsBucket"] || !buckets["ArchiveBucket"] {
		t.Fatalf("KmsKeyArn encrypts %v, want the objects and archive buckets among them", buckets)
	}
	// The objects bucket's name is spelled out where a !Ref would be circular.
	named := func(r any) string {
		if s := cfn.Scalar(asMap(r)["Fn::Sub"]); strings.Contains(s, "${AWS::StackName}-objects-") {
			return "ObjectsBucket"
		}
		for _, ref := range cfn.Refs(r) {
			if buckets[ref.Target] {
				return ref.Target
			}
		}
		return ""
	}
	need := map[string]string{"s3:PutObject": "kms:GenerateDataKey", "s3:GetObject": "kms:Decrypt", "s3:GetObjectVersion": "kms:Decrypt"}
	// s3:GetObject also authorizes HeadObject, which reads no bytes and so
	// needs no key: these roles call HeadObject only (a shared blob's
	// current version, before it is deleted).
	headOnly := map[string]bool{"ObjectsReaperFunctionRole": true, "ObjectsSweeperFunctionRole": true}
	for id, list := range policyDocuments(tpl) {
		want := map[string]bool{}
		got := map[string]bool{}
		for _, doc := range list {
			for _, st := range resourcesOf(asMap(doc)["Statement"]) {
				s := asMap(st)
				// A statement granted only with search on (HasSearch) is
				// read as any other: what it reads needs the key too.
				if args := asList(s["Fn::If"]); len(args) == 3 && cfn.Scalar(args[0]) == "HasSearch" && refTarget(args[2]) == "AWS::NoValue" {
					s = asMap(args[1])
				}
				if cond := s["Fn::If"]; cond != nil {
					args := asList(cond)
					in := asMap(args[1])
					if cfn.Scalar(args[0]) != "HasKmsKey" || refTarget(in["Resource"]) != "KmsKeyArn" || refTarget(args[2]) != "AWS::NoValue" ||
						!strings.Contains(fmt.Sprint(in["Condition"]), "kms:ViaService") {
						t.Errorf("%s: a conditional statement %v, want a HasKmsKey grant on KmsKeyArn through S3 (kms:ViaService)", id, args)
					}
					for _, a := range stringsOf(in["Action"]) {
						got[a] = true
					}
					continue
				}
				for _, r := range resourcesOf(s["Resource"]) {
					if named(r) == "" {
						continue
					}
					for _, a := range stringsOf(s["Action"]) {
						if k := need[a]; k != "" && !(headOnly[id] && a == "s3:GetObject") {
							want[k] = true
						}
					}
				}
			}
		}
		for k := range want {
			if !got[k] {
				t.Errorf("%s reads or writes an SSE-KMS bucket's objects, but has no %s when KmsKeyArn is set", id, k)
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("%s has %s when KmsKeyArn is set, but does not use the buckets that way", id, k)
			}
		}
	}
}
