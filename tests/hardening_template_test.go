package tests

// What no scanner checks (cfn-lint and cfn-guard run in make lint): the
// stack's hardening as this project means it, read from template.yaml.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// refTarget is the logical id a !Ref or !GetAtt names, or "".
func refTarget(v any) string {
	if refs := cfn.Refs(v); len(refs) == 1 {
		return refs[0].Target
	}
	return ""
}

func props(tpl *cfn.Template, id string) map[string]any { return tpl.Resources[id].Properties }

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// denyInsecureTransport reports whether a policy document denies every
// principal everything on the given resources when the request is not TLS.
func denyInsecureTransport(doc any, action string, resources ...string) bool {
	for _, st := range asList(asMap(doc)["Statement"]) {
		s := asMap(st)
		cond := asMap(asMap(s["Condition"])["Bool"])
		if cfn.Scalar(s["Effect"]) != "Deny" || cfn.Scalar(s["Principal"]) != "*" ||
			cfn.Scalar(s["Action"]) != action || cfn.Scalar(cond["aws:SecureTransport"]) != "false" {
			continue
		}
		covered := map[string]bool{}
		for _, r := range asList(s["Resource"]) {
			for _, ref := range cfn.Refs(r) {
				covered[ref.Target] = true
			}
		}
		all := true
		for _, r := range resources {
			all = all && covered[r]
		}
		if all {
			return true
		}
	}
	return false
}

func TestTemplateQueuesAndBucketsTLSOnly(t *testing.T) {
	tpl := mustTemplate(t)
	policed := map[string]bool{}
	for _, id := range tpl.ResourceIDs("AWS::SQS::QueuePolicy") {
		p := props(tpl, id)
		for _, q := range asList(p["Queues"]) {
			if target := refTarget(q); target != "" && denyInsecureTransport(p["PolicyDocument"], "sqs:*", target) {
				policed[target] = true
			}
		}
	}
	for _, id := range tpl.ResourceIDs("AWS::SQS::Queue") {
		if !policed[id] {
			t.Errorf("queue %s: no queue policy denies sqs:* without TLS (aws:SecureTransport false)", id)
		}
		if cfn.Scalar(props(tpl, id)["SqsManagedSseEnabled"]) != "true" && props(tpl, id)["KmsMasterKeyId"] == nil {
			t.Errorf("queue %s: not encrypted at rest", id)
		}
	}
	bucketPolicy := map[string]bool{}
	for _, id := range tpl.ResourceIDs("AWS::S3::BucketPolicy") {
		p := props(tpl, id)
		if b := refTarget(p["Bucket"]); b != "" && denyInsecureTransport(p["PolicyDocument"], "s3:*", b) {
			bucketPolicy[b] = true
		}
	}
	for _, id := range tpl.ResourceIDs("AWS::S3::Bucket") {
		if !bucketPolicy[id] {
			t.Errorf("bucket %s: no bucket policy denies s3:* without TLS", id)
		}
	}
}

// deletionPolicies reads DeletionPolicy and UpdateReplacePolicy of each
// resource (cfn.Template keeps neither).
func deletionPolicies(t *testing.T) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	field := func(m *yaml.Node, key string) *yaml.Node {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	res := field(doc.Content[0], "Resources")
	out := map[string][2]string{}
	for i := 0; i+1 < len(res.Content); i += 2 {
		var p [2]string
		if n := field(res.Content[i+1], "DeletionPolicy"); n != nil {
			p[0] = n.Value
		}
		if n := field(res.Content[i+1], "UpdateReplacePolicy"); n != nil {
			p[1] = n.Value
		}
		out[res.Content[i].Value] = p
	}
	return out
}

// Data outlives the stack: tables, buckets and queues are retained, and
// tables refuse DeleteTable and keep point-in-time recovery.
func TestTemplateDataIsRetainedAndProtected(t *testing.T) {
	tpl := mustTemplate(t)
	policies := deletionPolicies(t)
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SQS::Queue"} {
		for _, id := range tpl.ResourceIDs(typ) {
			if got := policies[id]; got != [2]string{"Retain", "Retain"} {
				t.Errorf("%s: DeletionPolicy, UpdateReplacePolicy = %v, want Retain, Retain", id, got)
			}
		}
	}
	for _, id := range tpl.ResourceIDs("AWS::DynamoDB::Table") {
		p := props(tpl, id)
		if cfn.Scalar(p["DeletionProtectionEnabled"]) != "true" {
			t.Errorf("table %s: DeletionProtectionEnabled is not true", id)
		}
		if cfn.Scalar(asMap(p["PointInTimeRecoverySpecification"])["PointInTimeRecoveryEnabled"]) != "true" {
			t.Errorf("table %s: point-in-time recovery is off", id)
		}
	}
	for _, id := range tpl.ResourceIDs("AWS::S3::Bucket") {
		p := props(tpl, id)
		if cfn.Scalar(asMap(p["VersioningConfiguration"])["Status"]) != "Enabled" {
			t.Errorf("bucket %s: not versioned", id)
		}
		expires := false
		for _, r := range asList(asMap(p["LifecycleConfiguration"])["Rules"]) {
			expires = expires || asMap(r)["NoncurrentVersionExpiration"] != nil
		}
		if !expires {
			t.Errorf("bucket %s: versioned, but no rule expires noncurrent versions", id)
		}
		if p["BucketEncryption"] == nil {
			t.Errorf("bucket %s: no default encryption", id)
		}
		if id != "LogsBucket" && refTarget(asMap(p["LoggingConfiguration"])["DestinationBucketName"]) != "LogsBucket" {
			t.Errorf("bucket %s: no server access logs to LogsBucket", id)
		}
	}
	// The search index is derived data (`ddbpipe search reindex` rebuilds
	// it from the objects table): its domain goes with the stack, on purpose.
	for _, id := range tpl.ResourceIDs("AWS::OpenSearchService::Domain") {
		if got := policies[id]; got != [2]string{"Delete", "Delete"} {
			t.Errorf("%s: DeletionPolicy, UpdateReplacePolicy = %v, want Delete, Delete (a derived index; say why if that changes)", id, got)
		}
	}
	// Athena's results live apart from every table location.
	wg := props(tpl, "ArchiveWorkGroup")
	rc := asMap(asMap(wg["WorkGroupConfiguration"])["ResultConfiguration"])
	if got := refTarget(rc["OutputLocation"]); got != "AthenaResultsBucket" {
		t.Errorf("Athena results go to %v, want the AthenaResultsBucket", rc["OutputLocation"])
	}
	if rc["EncryptionConfiguration"] == nil {
		t.Error("Athena results are not encrypted")
	}
}

// streamConsumers are the functions a DynamoDB stream invokes: those with a
// DynamoDB event, and the archiver, whose ledger mappings the rotator creates.
func streamConsumers(tpl *cfn.Template) []string {
	var out []string
	for _, f := range tpl.Functions() {
		for _, e := range f.Events {
			if e.Type == "DynamoDB" || e.Type == "Kinesis" {
				out = append(out, f.LogicalID)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestTemplateFailuresHaveADestination(t *testing.T) {
	tpl := mustTemplate(t)
	mappings := 0
	for _, f := range tpl.Functions() {
		async := false
		for _, e := range f.Events {
			switch e.Type {
			case "DynamoDB", "Kinesis":
				mappings++
				dest := asMap(asMap(e.Properties["DestinationConfig"])["OnFailure"])
				if cfn.Scalar(dest["Type"]) != "SQS" || refTarget(dest["Destination"]) == "" {
					t.Errorf("%s event %s: no on-failure destination", f.LogicalID, e.Name)
				}
			case "S3", "Schedule", "ScheduleV2", "SNS", "EventBridgeRule", "CloudWatchEvent":
				async = true
			}
		}
		if async {
			dest := asMap(asMap(asMap(f.Properties["EventInvokeConfig"])["DestinationConfig"])["OnFailure"])
			if refTarget(dest["Destination"]) == "" {
				t.Errorf("%s is invoked asynchronously, but has no EventInvokeConfig on-failure destination", f.LogicalID)
			}
		}
	}
	if mappings < 2 {
		t.Errorf("%d stream mappings in the template, want the reaper's and the archiver's", mappings)
	}
	// The rotator's run-time mappings (ledger tables → archiver) get the same.
	rot, err := tpl.Function("RotatorFunction")
	if err != nil {
		t.Fatal(err)
	}
	if refTarget(rot.Environment()["STREAM_FAILURES_QUEUE_ARN"]) != "StreamFailuresQueue" {
		t.Error("the rotator's mappings have no on-failure queue (STREAM_FAILURES_QUEUE_ARN)")
	}
}

// alarmOn is an alarm's namespace, metric and the logical id its first
// dimension names.
type alarmOn struct{ namespace, metric, target string }

func alarmsByMetric(tpl *cfn.Template) map[alarmOn]string {
	out := map[alarmOn]string{}
	for _, id := range tpl.ResourceIDs("AWS::CloudWatch::Alarm") {
		p := props(tpl, id)
		add := func(ns, name string, dims any) {
			for _, d := range asList(dims) {
				out[alarmOn{ns, name, refTarget(asMap(d)["Value"])}] = id
			}
		}
		add(cfn.Scalar(p["Namespace"]), cfn.Scalar(p["MetricName"]), p["Dimensions"])
		for _, m := range asList(p["Metrics"]) {
			metric := asMap(asMap(asMap(m)["MetricStat"])["Metric"])
			add(cfn.Scalar(metric["Namespace"]), cfn.Scalar(metric["MetricName"]), metric["Dimensions"])
		}
	}
	return out
}

func TestTemplateEveryFailureModeHasAnAlarm(t *testing.T) {
	tpl := mustTemplate(t)
	alarms := alarmsByMetric(tpl)
	want := func(ns, metric, target, why string) {
		t.Helper()
		if alarms[alarmOn{ns, metric, target}] == "" {
			t.Errorf("no alarm on %s/%s of %s (%s)", ns, metric, target, why)
		}
	}
	for _, f := range tpl.Functions() {
		want("AWS/Lambda", "Errors", f.LogicalID, "per function")
		want("AWS/Lambda", "Throttles", f.LogicalID, "per function")
	}
	consumers := streamConsumers(tpl)
	if !slices.Contains(consumers, "ArchiverFunction") || !slices.Contains(consumers, "ObjectsReaperFunction") {
		t.Errorf("stream consumers %v, want the archiver and the reaper", consumers)
	}
	for _, c := range consumers {
		want("AWS/Lambda", "IteratorAge", c, "per stream consumer")
	}
	for _, id := range tpl.ResourceIDs("AWS::SQS::Queue") {
		if id == "VotesQueue" {
			want("AWS/SQS", "ApproximateAgeOfOldestMessage", id, "votes waiting")
			continue
		}
		want("AWS/SQS", "ApproximateNumberOfMessagesVisible", id, "dead-letter, reject and failure queues")
	}
	for _, id := range tpl.ResourceIDs("AWS::DynamoDB::Table") {
		want("AWS/DynamoDB", "ReadThrottleEvents", id, "per table")
		want("AWS/DynamoDB", "WriteThrottleEvents", id, "per table")
	}
	for _, id := range tpl.ResourceIDs(cfn.TypeHttpApi) {
		want("AWS/ApiGateway", "5xx", id, "API errors")
	}
	for _, id := range tpl.ResourceIDs("AWS::OpenSearchService::Domain") {
		for _, m := range []string{"ClusterStatus.red", "ClusterIndexWritesBlocked", "FreeStorageSpace", "AutomatedSnapshotFailure", "JVMMemoryPressure"} {
			want("AWS/ES", m, id, "a search domain's health")
		}
	}
}

func TestTemplateAlarmsNotifyBothWays(t *testing.T) {
	tpl := mustTemplate(t)
	ids := tpl.ResourceIDs("AWS::CloudWatch::Alarm")
	for _, id := range ids {
		p := props(tpl, id)
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if refs := cfn.Refs(p[k]); len(refs) != 1 || refs[0].Target != "AlarmTopic" {
				t.Errorf("%s: %s %v, want the AlarmTopic", id, k, p[k])
			}
		}
	}
	// The alarm topic is encrypted with a key CloudWatch may use.
	key := refTarget(props(tpl, "AlarmTopic")["KmsMasterKeyId"])
	if key == "" {
		t.Fatal("AlarmTopic is not encrypted")
	}
	cw := false
	for _, st := range asList(asMap(props(tpl, key)["KeyPolicy"])["Statement"]) {
		s := asMap(st)
		cw = cw || cfn.Scalar(asMap(s["Principal"])["Service"]) == "cloudwatch.amazonaws.com"
	}
	if !cw {
		t.Errorf("%s: the key policy does not let cloudwatch.amazonaws.com publish to the topic", key)
	}
	// The dashboard's alarm widget lists every alarm.
	body := cfn.Scalar(props(tpl, "Dashboard")["DashboardBody"])
	for _, id := range ids {
		if !strings.Contains(body, ":alarm:${"+id+"}") {
			t.Errorf("the dashboard does not show %s", id)
		}
	}
}

func TestTemplateFunctionsLogAndTrace(t *testing.T) {
	tpl := mustTemplate(t)
	for _, f := range tpl.Functions() {
		lg := refTarget(asMap(f.Properties["LoggingConfig"])["LogGroup"])
		if lg == "" || tpl.Resources[lg].Type != "AWS::Logs::LogGroup" {
			t.Errorf("%s: LoggingConfig.LogGroup %v is not a log group of the template", f.LogicalID, lg)
			continue
		}
		if refTarget(props(tpl, lg)["RetentionInDays"]) != "LogRetentionDays" {
			t.Errorf("%s: retention %v, want LogRetentionDays", lg, props(tpl, lg)["RetentionInDays"])
		}
		if refTarget(f.Properties["Tracing"]) != "TracingMode" {
			t.Errorf("%s: Tracing %v, want !Ref TracingMode", f.LogicalID, f.Properties["Tracing"])
		}
	}
	if p := tpl.Parameters["TracingMode"]; cfn.Scalar(p.Default) != "Active" {
		t.Errorf("TracingMode defaults to %v, want Active", p.Default)
	}
}

// noResourceLevel lists the actions that accept only Resource "*" (IAM's
// service authorization reference: no resource types), plus
// CreateEventSourceMapping, which is narrowed by lambda:FunctionArn instead.
var noResourceLevel = map[string]bool{
	"dynamodb:ListTables":               true,
	"dynamodb:ListStreams":              true,
	"lambda:ListEventSourceMappings":    true,
	"lambda:CreateEventSourceMapping":   true,
	"cloudwatch:PutMetricData":          true,
	"xray:PutTraceSegments":             true,
	"xray:PutTelemetryRecords":          true,
	"logs:CreateLogGroup":               false, // has resource-level permissions
	"s3:ListAllMyBuckets":               true,
	"sqs:ListQueues":                    true,
	"athena:ListWorkGroups":             true,
	"lambda:GetAccountSettings":         true,
	"dynamodb:DescribeLimits":           true,
	"dynamodb:DescribeReservedCapacity": true,
}

// Every policy written in the template: the functions' (their roles'
// inline policies, and any Policies left on a function) and the managed
// policies for callers.
func templatePolicyDocuments(tpl *cfn.Template) map[string][]any {
	docs := map[string][]any{}
	for _, f := range tpl.Functions() {
		for _, pol := range asList(f.Properties["Policies"]) {
			docs[f.LogicalID] = append(docs[f.LogicalID], pol)
		}
	}
	for _, id := range tpl.ResourceIDs("AWS::IAM::Role") {
		for _, pol := range asList(props(tpl, id)["Policies"]) {
			docs[id] = append(docs[id], asMap(pol)["PolicyDocument"])
		}
	}
	for _, id := range append(tpl.ResourceIDs("AWS::IAM::ManagedPolicy"), tpl.ResourceIDs("AWS::IAM::Policy")...) {
		docs[id] = append(docs[id], props(tpl, id)["PolicyDocument"])
	}
	return docs
}

func TestTemplateLeastPrivilege(t *testing.T) {
	tpl := mustTemplate(t)
	if len(tpl.ResourceIDs("AWS::IAM::Role")) < len(tpl.Functions()) {
		t.Errorf("%d roles for %d functions: each function gets its own", len(tpl.ResourceIDs("AWS::IAM::Role")), len(tpl.Functions()))
	}
	for owner, pols := range templatePolicyDocuments(tpl) {
		for _, pol := range pols {
			pm := asMap(pol)
			for tmpl := range pm {
				if tmpl != "Statement" && tmpl != "Version" && strings.HasPrefix(tmpl, "SQS") {
					t.Errorf("%s: SAM policy template %s grants sqs:SendMessage*; name the action", owner, tmpl)
				}
			}
			for _, st := range asList(pm["Statement"]) {
				s := asMap(st)
				if cfn.Scalar(s["Effect"]) != "Allow" {
					continue
				}
				actions := asList(s["Action"])
				if len(actions) == 0 {
					actions = []any{s["Action"]}
				}
				star := cfn.Scalar(s["Resource"]) == "*"
				for _, a := range actions {
					name := cfn.Scalar(a)
					if strings.Contains(name, "*") {
						t.Errorf("%s: wildcard action %s", owner, name)
					}
					if star && !noResourceLevel[name] {
						t.Errorf("%s: %s on Resource \"*\", but it has resource-level permissions", owner, name)
					}
					if name == "lambda:CreateEventSourceMapping" || name == "lambda:DeleteEventSourceMapping" {
						cond := asMap(asMap(s["Condition"])["ArnLike"])
						var fns []string
						for _, r := range cfn.Refs(cond["lambda:FunctionArn"]) {
							fns = append(fns, r.Target)
						}
						if slices.Sort(fns); fmt.Sprint(fns) != "[ArchiverFunction TallyFunction]" {
							t.Errorf("%s: %s conditioned on %v (lambda:FunctionArn), want the two stream readers' ARNs", owner, name, fns)
						}
					}
				}
				for _, r := range append(asList(s["Resource"]), s["Resource"]) {
					if sub := cfn.Scalar(asMap(r)["Fn::Sub"]); strings.Contains(sub, "-votes-*") {
						t.Errorf("%s: ledger tables named %q; want the exact pattern <prefix>-votes-????-??", owner, sub)
					}
				}
			}
		}
	}
}

func TestTemplateParametersCannotBreakTheStack(t *testing.T) {
	tpl := mustTemplate(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n  CounterBatchingWindow:\n    # (Rules") {
		t.Error("template Rules: no CounterBatchingWindow rule (a batching window ≥ 1 s when the batch size is over 10)")
	}
	for name, p := range tpl.Parameters {
		if p.Type == "Number" && len(p.AllowedValues) == 0 && (p.MinValue == nil) {
			t.Errorf("parameter %s: a number without MinValue or AllowedValues", name)
		}
		if p.Description == "" {
			t.Errorf("parameter %s: no Description (sam deploy --guided shows it)", name)
		}
	}
}

// samconfig.toml's environments deploy: each parameter_overrides names
// parameters of the template with values their constraints allow, and keeps
// the batching-window rule.
func TestSamconfigOverridesAreValid(t *testing.T) {
	tpl := mustTemplate(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	envs := 0
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "parameter_overrides = ")
		if !ok {
			continue
		}
		envs++
		overrides := map[string]string{}
		for _, kv := range strings.Fields(strings.Trim(v, `"`)) {
			k, val, _ := strings.Cut(kv, "=")
			overrides[k] = val
		}
		vals, err := tpl.ParamValues(overrides)
		if err != nil {
			t.Errorf("samconfig.toml %s: %v", line, err)
			continue
		}
		if n, _ := strconv.Atoi(vals["CounterBatchSize"]); n > 10 && vals["CounterBatchingWindowSeconds"] == "0" {
			t.Errorf("samconfig.toml %s: CounterBatchSize %d needs CounterBatchingWindowSeconds ≥ 1", line, n)
		}
	}
	if envs < 2 {
		t.Errorf("samconfig.toml: %d parameter_overrides, want the default (production) and dev environments", envs)
	}
}
