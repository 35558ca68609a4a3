package tests

// Least privilege as AWS evaluates it: the SAM-transformed template (what
// `sam deploy` creates), not template.yaml, because SAM adds roles, policies
// and AWS managed policies of its own to the functions it transforms.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
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

// transformed is the SAM-transformed template (tools/cfncheck/transform.py,
// as make lint runs it), parsed. Without Python and aws-sam-translator the
// test skips, or fails under DDBPIPE_REQUIRE_STACK=1 (make test).
func transformed(t *testing.T) map[string]map[string]any {
	t.Helper()
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	root := repoRoot(t)
	cmd := exec.Command(python, filepath.Join(root, "tools/cfncheck/transform.py"), filepath.Join(root, "template.yaml"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if probe := exec.Command(python, "-c", "import samtranslator, boto3"); probe.Run() != nil && os.Getenv("DDBPIPE_REQUIRE_STACK") != "1" {
			t.Skipf("the SAM transform needs %s with aws-sam-translator and boto3 (pip install aws-sam-translator boto3)", python)
		}
		t.Fatalf("transform: %v\n%s", err, stderr.String())
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
