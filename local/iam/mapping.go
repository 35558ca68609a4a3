// Package iam judges the local stack's AWS calls as IAM would: it maps each
// request reaching a local proxy to the IAM actions and resource ARNs it
// really touches (Map), names the identity that signed it (Identities), and
// asks an IAM evaluator whether that identity's policies in the transformed
// template, with the resource's own policy, allow it (Judge).
package iam

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
)

// Service names the API of a request, as the proxies front them.
type Service string

// The services the local stack judges.
const (
	DynamoDB Service = "dynamodb"
	S3       Service = "s3"
	SQS      Service = "sqs"
	Lambda   Service = "lambda"
	// OpenSearch is an OpenSearch Service domain's data plane (the REST
	// API the search proxy presents), signed with SigV4 as service "es".
	OpenSearch Service = "es"
)

// Call is one authorization IAM makes for a request: an action on a
// resource, with the request's context keys. A request may need several
// (a transaction authorizes each of its items, CopyObject reads its source
// and writes its destination).
type Call struct {
	Action   string // "dynamodb:PutItem"
	Resource string // "arn:aws:dynamodb:us-east-1:000000000000:table/T", or "*"
	// Context holds the request's own condition keys (s3:prefix,
	// lambda:FunctionArn, ...). The judge adds the keys every request
	// carries (aws:SecureTransport, aws:PrincipalArn, ...).
	Context map[string]string
}

func (c Call) String() string { return c.Action + " " + c.Resource }

// Place is where the local stack's resources live: the region and account
// their ARNs carry.
type Place struct {
	Region    string
	AccountID string
	// BucketKeys are the buckets whose default encryption is SSE-KMS, with
	// their key's ARN: S3 uses the key on the caller's behalf, so a write
	// also needs kms:GenerateDataKey and a read kms:Decrypt on it, with
	// kms:ViaService s3.<region>.amazonaws.com (Policies.BucketKeys).
	BucketKeys map[string]string
	// SearchDomain is the ARN of the stack's search domain
	// (arn:aws:es:<region>:<account>:domain/<name>), which OpenSearch
	// requests are judged on; "" when the stack has none.
	SearchDomain string
}

// Request is what Map reads of an HTTP request: the proxies hand over the
// body they buffered (DynamoDB, SQS, and S3's DeleteObjects).
type Request struct {
	Service Service
	Method  string
	Path    string // unescaped path
	Query   url.Values
	Header  http.Header
	Host    string
	Body    []byte
}

// FromHTTP builds a Request from r and the body read from it.
func FromHTTP(svc Service, r *http.Request, body []byte) Request {
	return Request{Service: svc, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header, Host: r.Host, Body: body}
}

// ErrUnmapped is wrapped by Map when a request's operation is not known:
// the local stack refuses what it cannot judge.
var ErrUnmapped = fmt.Errorf("iam: operation not mapped")

// Map returns the authorizations req needs.
func Map(req Request, p Place) ([]Call, error) {
	switch req.Service {
	case DynamoDB:
		return p.dynamo(req)
	case S3:
		return p.s3(req)
	case SQS:
		return p.sqs(req)
	case Lambda:
		return p.lambda(req, nil)
	case OpenSearch:
		return p.openSearch(req)
	}
	return nil, fmt.Errorf("%w: service %q", ErrUnmapped, req.Service)
}

// ---------------------------------------------------------------- DynamoDB

func (p Place) tableARN(table string) string {
	if strings.HasPrefix(table, "arn:") {
		return p.dynamoARN(table)
	}
	return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", p.Region, p.AccountID, table)
}

// dynamoARN puts a DynamoDB ARN in the stack's region and account:
// DynamoDB Local names its own region ("ddblocal") in the table and stream
// ARNs it returns.
func (p Place) dynamoARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "dynamodb" {
		return arn
	}
	parts[3], parts[4] = p.Region, p.AccountID
	return strings.Join(parts, ":")
}

// NormalizeARN puts an ARN the local servers returned in the stack's
// region and account (DynamoDB Local's "ddblocal" region); other ARNs are
// returned as they are.
func (p Place) NormalizeARN(arn string) string { return p.dynamoARN(arn) }

// dynamoTableActions are the operations authorized as themselves on the
// table named by TableName (or ResourceArn).
var dynamoTableActions = map[string]bool{
	"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"CreateTable": true, "DeleteTable": true, "DescribeTable": true, "UpdateTable": true,
	"DescribeTimeToLive": true, "UpdateTimeToLive": true,
	"DescribeContinuousBackups": true, "UpdateContinuousBackups": true,
	"TagResource": true, "UntagResource": true, "ListTagsOfResource": true,
}

// dynamoStreamActions are the DynamoDB Streams operations, on StreamArn.
var dynamoStreamActions = map[string]bool{"DescribeStream": true, "GetShardIterator": true, "GetRecords": true}

func (p Place) dynamo(req Request) ([]Call, error) {
	op := targetAction(req.Header.Get("X-Amz-Target"))
	var body struct {
		TableName     string
		IndexName     string
		ResourceArn   string
		StreamArn     string
		ShardIterator string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return nil, fmt.Errorf("iam: dynamodb %s body: %w", op, err)
		}
	}
	call := func(action, resource string) Call { return Call{Action: "dynamodb:" + action, Resource: resource} }
	switch {
	case op == "Query" || op == "Scan":
		res := p.tableARN(body.TableName)
		if body.IndexName != "" {
			res += "/index/" + body.IndexName
		}
		return []Call{call(op, res)}, nil
	case dynamoTableActions[op]:
		t := body.TableName
		if t == "" {
			t = body.ResourceArn
		}
		if t == "" {
			return nil, fmt.Errorf("%w: dynamodb %s without TableName", ErrUnmapped, op)
		}
		return []Call{call(op, p.tableARN(t))}, nil
	case op == "BatchGetItem" || op == "BatchWriteItem":
		var out []Call
		for _, t := range slices.Sorted(maps.Keys(body.RequestItems)) {
			out = append(out, call(op, p.tableARN(t)))
		}
		return out, nil
	case op == "TransactWriteItems" || op == "TransactGetItems":
		// Each item is authorized as its own action on its own table.
		kinds := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		var out []Call
		for _, item := range body.TransactItems {
			for kind, a := range item {
				action, ok := kinds[kind]
				if !ok {
					return nil, fmt.Errorf("%w: dynamodb %s item %q", ErrUnmapped, op, kind)
				}
				out = append(out, call(action, p.tableARN(a.TableName)))
			}
		}
		return dedupe(out), nil
	case dynamoStreamActions[op]:
		arn := body.StreamArn
		if op == "GetRecords" {
			// The shard iterator names its stream; DynamoDB Local's is
			// opaque, so GetRecords is judged on the stream the iterator
			// came from when the caller recorded it (Iterators), else on
			// every stream of the account.
			arn = iteratorStream(body.ShardIterator)
		}
		if arn == "" {
			arn = fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/*/stream/*", p.Region, p.AccountID)
		}
		return []Call{call(op, p.dynamoARN(arn))}, nil
	case op == "ListTables" || op == "ListStreams":
		return []Call{call(op, "*")}, nil
	}
	return nil, fmt.Errorf("%w: dynamodb %q", ErrUnmapped, op)
}

// iteratorStream reads the stream ARN from a DynamoDB Local shard
// iterator, which begins with it followed by a "|" ("" when it does not).
func iteratorStream(it string) string {
	arn, _, ok := strings.Cut(it, "|")
	if !ok || !strings.HasPrefix(arn, "arn:") || !strings.Contains(arn, "/stream/") {
		return ""
	}
	return arn
}

// --------------------------------------------------------------------- S3

// s3BucketActions maps a bucket operation (faultproxy's names) to its IAM
// action, where it is not simply "s3:" + the operation.
var s3BucketActions = map[string]string{
	"ListObjects": "ListBucket", "ListObjectsV2": "ListBucket", "HeadBucket": "ListBucket",
	"ListObjectVersions": "ListBucketVersions", "ListMultipartUploads": "ListBucketMultipartUploads",
	"PutBucketLifecycleConfiguration": "PutLifecycleConfiguration", "GetBucketLifecycleConfiguration": "GetLifecycleConfiguration",
	"DeleteBucketLifecycle":              "PutLifecycleConfiguration",
	"PutBucketEncryption":                "PutEncryptionConfiguration",
	"GetBucketEncryption":                "GetEncryptionConfiguration",
	"PutPublicAccessBlock":               "PutBucketPublicAccessBlock",
	"GetPublicAccessBlock":               "GetBucketPublicAccessBlock",
	"PutBucketNotificationConfiguration": "PutBucketNotification",
	"GetBucketNotificationConfiguration": "GetBucketNotification",
	"PutBucketOwnershipControls":         "PutBucketOwnershipControls",
	"GetBucketVersioning":                "GetBucketVersioning",
	"PutBucketVersioning":                "PutBucketVersioning",
	"GetBucketLocation":                  "GetBucketLocation",
	"CreateBucket":                       "CreateBucket",
	"DeleteBucket":                       "DeleteBucket",
	"PutBucketPolicy":                    "PutBucketPolicy",
	"GetBucketPolicy":                    "GetBucketPolicy",
	"PutBucketTagging":                   "PutBucketTagging",
	"GetBucketTagging":                   "GetBucketTagging",
}

func (p Place) s3(req Request) ([]Call, error) {
	calls, err := p.s3Calls(req)
	if err != nil || len(p.BucketKeys) == 0 {
		return calls, err
	}
	return p.withKMS(req, calls), nil
}

// withKMS adds the KMS calls S3 makes on the caller's behalf for an object
// of a bucket encrypted with a KMS key: kms:GenerateDataKey to write
// (PutObject, CreateMultipartUpload, UploadPart, a copy's destination),
// kms:Decrypt to read (GetObject, a copy's source, CompleteMultipartUpload,
// which reads the parts). HEAD reads metadata only and needs no key.
func (p Place) withKMS(req Request, calls []Call) []Call {
	bucket, key := s3Address(req.Host, req.Path)
	op := faultproxy.S3Action(req.Method, bucket, key, req.Query, req.Header)
	via := map[string]string{"kms:ViaService": "s3." + p.Region + ".amazonaws.com"}
	out := calls
	for _, c := range calls {
		rest, ok := strings.CutPrefix(c.Resource, "arn:aws:s3:::")
		if !ok {
			continue
		}
		b, _, isObject := strings.Cut(rest, "/")
		keyARN := p.BucketKeys[b]
		if keyARN == "" || !isObject {
			continue
		}
		var need []string
		switch {
		case c.Action == "s3:PutObject" && op == "CompleteMultipartUpload":
			need = []string{"kms:Decrypt"}
		case c.Action == "s3:PutObject":
			need = []string{"kms:GenerateDataKey"}
		case (c.Action == "s3:GetObject" || c.Action == "s3:GetObjectVersion") && op != "HeadObject":
			need = []string{"kms:Decrypt"}
		}
		for _, a := range need {
			out = append(out, Call{Action: a, Resource: keyARN, Context: via})
		}
	}
	return out
}

func (p Place) s3Calls(req Request) ([]Call, error) {
	bucket, key := s3Address(req.Host, req.Path)
	op := faultproxy.S3Action(req.Method, bucket, key, req.Query, req.Header)
	bucketARN := "arn:aws:s3:::" + bucket
	objectARN := bucketARN + "/" + key
	versioned := req.Query.Get("versionId") != ""
	call := func(action, resource string) Call { return Call{Action: "s3:" + action, Resource: resource} }
	switch op {
	case "":
		return nil, fmt.Errorf("%w: s3 %s %s", ErrUnmapped, req.Method, req.Path)
	case "ListBuckets":
		return []Call{call("ListAllMyBuckets", "*")}, nil
	case "ListObjects", "ListObjectsV2", "ListObjectVersions":
		c := call(s3BucketActions[op], bucketARN)
		c.Context = map[string]string{}
		for _, k := range []string{"prefix", "delimiter", "max-keys"} {
			if req.Query.Has(k) {
				c.Context["s3:"+k] = req.Query.Get(k)
			}
		}
		return []Call{c}, nil
	case "DeleteObjects":
		// Authorized per key, as DeleteObject or DeleteObjectVersion.
		var doc struct {
			Objects []struct{ Key, VersionId string } `xml:"Object"`
		}
		if err := xml.Unmarshal(req.Body, &doc); err != nil {
			return nil, fmt.Errorf("iam: s3 DeleteObjects body: %w", err)
		}
		var out []Call
		for _, o := range doc.Objects {
			action := "DeleteObject"
			if o.VersionId != "" {
				action = "DeleteObjectVersion"
			}
			out = append(out, call(action, bucketARN+"/"+o.Key))
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: s3 DeleteObjects with no keys", ErrUnmapped)
		}
		return dedupe(out), nil
	case "GetObject", "HeadObject":
		if versioned {
			return []Call{call("GetObjectVersion", objectARN)}, nil
		}
		return []Call{call("GetObject", objectARN)}, nil
	case "DeleteObject":
		if versioned {
			return []Call{call("DeleteObjectVersion", objectARN)}, nil
		}
		return []Call{call("DeleteObject", objectARN)}, nil
	case "PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload":
		return []Call{call("PutObject", objectARN)}, nil
	case "CopyObject", "UploadPartCopy":
		src, err := copySource(req.Header.Get("X-Amz-Copy-Source"))
		if err != nil {
			return nil, err
		}
		return []Call{call(src.action, src.arn), call("PutObject", objectARN)}, nil
	case "AbortMultipartUpload":
		return []Call{call("AbortMultipartUpload", objectARN)}, nil
	case "ListParts":
		return []Call{call("ListMultipartUploadParts", objectARN)}, nil
	case "GetObjectTagging", "PutObjectTagging", "DeleteObjectTagging", "GetObjectAcl", "PutObjectAcl", "GetObjectAttributes":
		if versioned {
			return []Call{call(strings.Replace(op, "Object", "ObjectVersion", 1), objectARN)}, nil
		}
		return []Call{call(op, objectARN)}, nil
	}
	if a, ok := s3BucketActions[op]; ok && key == "" {
		return []Call{call(a, bucketARN)}, nil
	}
	return nil, fmt.Errorf("%w: s3 %s", ErrUnmapped, op)
}

type source struct{ action, arn string }

// copySource reads X-Amz-Copy-Source ("bucket/key?versionId=v", URL-encoded).
func copySource(h string) (source, error) {
	h = strings.TrimPrefix(h, "/")
	path, query, _ := strings.Cut(h, "?")
	path, err := url.PathUnescape(path)
	if err != nil || !strings.Contains(path, "/") {
		return source{}, fmt.Errorf("iam: s3 copy source %q", h)
	}
	q, _ := url.ParseQuery(query)
	if q.Get("versionId") != "" {
		return source{"GetObjectVersion", "arn:aws:s3:::" + path}, nil
	}
	return source{"GetObject", "arn:aws:s3:::" + path}, nil
}

// s3Address splits a path-style request into bucket and key (or reads the
// bucket from a <bucket>.localhost host).
func s3Address(host, path string) (bucket, key string) {
	path = strings.TrimPrefix(path, "/")
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	if b, ok := strings.CutSuffix(host, ".localhost"); ok && b != "" {
		return b, path
	}
	bucket, key, _ = strings.Cut(path, "/")
	return bucket, key
}

// -------------------------------------------------------------------- SQS

// sqsActions maps the batch operations to the action IAM authorizes them as.
var sqsActions = map[string]string{
	"SendMessageBatch":             "SendMessage",
	"DeleteMessageBatch":           "DeleteMessage",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}

func (p Place) sqs(req Request) ([]Call, error) {
	var op, queueURL, queueName string
	if target := req.Header.Get("X-Amz-Target"); target != "" {
		op = targetAction(target)
		var body struct{ QueueUrl, QueueName string }
		if len(req.Body) > 0 {
			if err := json.Unmarshal(req.Body, &body); err != nil {
				return nil, fmt.Errorf("iam: sqs %s body: %w", op, err)
			}
		}
		queueURL, queueName = body.QueueUrl, body.QueueName
	} else {
		fields := url.Values{}
		for k, v := range req.Query {
			fields[k] = v
		}
		if form, err := url.ParseQuery(string(req.Body)); err == nil {
			for k, v := range form {
				fields[k] = append(fields[k], v...)
			}
		}
		op, queueURL, queueName = fields.Get("Action"), fields.Get("QueueUrl"), fields.Get("QueueName")
		if queueURL == "" && req.Path != "" && req.Path != "/" {
			queueURL = "http://" + req.Host + req.Path
		}
	}
	if op == "" {
		return nil, fmt.Errorf("%w: sqs request without an action", ErrUnmapped)
	}
	action := op
	if a, ok := sqsActions[op]; ok {
		action = a
	}
	switch op {
	case "ListQueues":
		return []Call{{Action: "sqs:ListQueues", Resource: "*"}}, nil
	case "CreateQueue", "GetQueueUrl":
		if queueName == "" {
			return nil, fmt.Errorf("%w: sqs %s without QueueName", ErrUnmapped, op)
		}
		return []Call{{Action: "sqs:" + action, Resource: p.queueARN(queueName)}}, nil
	}
	name, err := queueNameOf(queueURL)
	if err != nil {
		return nil, fmt.Errorf("iam: sqs %s: %w", op, err)
	}
	return []Call{{Action: "sqs:" + action, Resource: p.queueARN(name)}}, nil
}

func (p Place) queueARN(name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", p.Region, p.AccountID, name)
}

// queueNameOf reads the queue name, the last segment of its URL
// (http://host/<account>/<name>).
func queueNameOf(queueURL string) (string, error) {
	u, err := url.Parse(queueURL)
	if err != nil || u.Path == "" {
		return "", fmt.Errorf("queue URL %q", queueURL)
	}
	path := strings.TrimSuffix(u.Path, "/")
	name := path[strings.LastIndexByte(path, '/')+1:]
	if name == "" {
		return "", fmt.Errorf("queue URL %q names no queue", queueURL)
	}
	return name, nil
}

// ----------------------------------------------------------------- Lambda

// MappingFunction returns the function ARN of an event source mapping by
// its UUID, for the lambda:FunctionArn key of calls naming a mapping.
type MappingFunction func(uuid string) (functionARN string, ok bool)

// MapLambda is Map for Lambda requests; mappings resolves a mapping's
// function (nil: calls naming a mapping carry no lambda:FunctionArn).
func MapLambda(req Request, p Place, mappings MappingFunction) ([]Call, error) {
	return p.lambda(req, mappings)
}

func (p Place) lambda(req Request, mappings MappingFunction) ([]Call, error) {
	path := strings.TrimPrefix(req.Path, "/2015-03-31")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	esmARN := func(uuid string) string {
		return fmt.Sprintf("arn:aws:lambda:%s:%s:event-source-mapping:%s", p.Region, p.AccountID, uuid)
	}
	withFunction := func(c Call, fn string) Call {
		if fn != "" {
			c.Context = map[string]string{"lambda:FunctionArn": p.functionARN(fn)}
		}
		return c
	}
	switch {
	case len(segs) >= 3 && segs[0] == "functions" && segs[2] == "invocations" && req.Method == http.MethodPost:
		return []Call{{Action: "lambda:InvokeFunction", Resource: p.functionARN(segs[1])}}, nil
	case segs[0] == "event-source-mappings" && len(segs) == 1 && req.Method == http.MethodPost:
		var body struct{ FunctionName string }
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return nil, fmt.Errorf("iam: lambda CreateEventSourceMapping body: %w", err)
		}
		// lambda:FunctionArn is the ARN the request names. A bare function
		// name sets no key here, so a condition on the key denies it: the
		// judge does not assume that AWS resolves the name (callers pass the
		// ARN, as the rotator does).
		if !strings.HasPrefix(body.FunctionName, "arn:") {
			return []Call{{Action: "lambda:CreateEventSourceMapping", Resource: "*"}}, nil
		}
		return []Call{withFunction(Call{Action: "lambda:CreateEventSourceMapping", Resource: "*"}, body.FunctionName)}, nil
	case segs[0] == "event-source-mappings" && len(segs) == 1 && req.Method == http.MethodGet:
		return []Call{{Action: "lambda:ListEventSourceMappings", Resource: "*"}}, nil
	case segs[0] == "event-source-mappings" && len(segs) == 2:
		action := map[string]string{http.MethodGet: "GetEventSourceMapping", http.MethodDelete: "DeleteEventSourceMapping", http.MethodPut: "UpdateEventSourceMapping"}[req.Method]
		if action == "" {
			break
		}
		fn := ""
		if mappings != nil {
			fn, _ = mappings(segs[1])
		}
		return []Call{withFunction(Call{Action: "lambda:" + action, Resource: esmARN(segs[1])}, fn)}, nil
	}
	return nil, fmt.Errorf("%w: lambda %s %s", ErrUnmapped, req.Method, req.Path)
}

// functionARN turns a function name, partial or full ARN into its ARN
// (unqualified: a version or alias suffix is dropped).
func (p Place) functionARN(fn string) string {
	if strings.HasPrefix(fn, "arn:") {
		parts := strings.Split(fn, ":")
		if len(parts) > 7 {
			parts = parts[:7]
		}
		return strings.Join(parts, ":")
	}
	name, _, _ := strings.Cut(fn, ":")
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", p.Region, p.AccountID, name)
}

// ------------------------------------------------------------- OpenSearch

// esActions are the data-plane actions of OpenSearch Service, one per
// HTTP method.
var esActions = map[string]string{
	http.MethodGet: "es:ESHttpGet", http.MethodHead: "es:ESHttpHead", http.MethodPost: "es:ESHttpPost",
	http.MethodPut: "es:ESHttpPut", http.MethodDelete: "es:ESHttpDelete", http.MethodPatch: "es:ESHttpPatch",
}

// openSearch maps a request to a domain's REST API as OpenSearch Service
// authorizes it: by its method and its URL path alone, never its body or
// its query. POST /_bulk is es:ESHttpPost on domain/<name>/_bulk whatever
// indexes its lines name, POST /_aliases likewise; GET /<alias>/_search is
// es:ESHttpGet on domain/<name>/<alias>/_search.
func (p Place) openSearch(req Request) ([]Call, error) {
	action, ok := esActions[req.Method]
	if !ok {
		return nil, fmt.Errorf("%w: es %s %s", ErrUnmapped, req.Method, req.Path)
	}
	if p.SearchDomain == "" {
		return nil, fmt.Errorf("%w: es %s %s: the stack has no search domain", ErrUnmapped, req.Method, req.Path)
	}
	return []Call{{Action: action, Resource: p.SearchDomain + "/" + strings.TrimPrefix(req.Path, "/")}}, nil
}

// ------------------------------------------------------------------ shared

// targetAction returns the operation of an X-Amz-Target header such as
// "DynamoDB_20120810.PutItem".
func targetAction(target string) string {
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// dedupe drops repeated calls without context (a transaction's two puts
// into one table are one authorization).
func dedupe(calls []Call) []Call {
	seen := map[string]bool{}
	out := calls[:0]
	for _, c := range calls {
		k := c.Action + " " + c.Resource
		if c.Context == nil && seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Call) int { return strings.Compare(a.String(), b.String()) })
	return out
}
