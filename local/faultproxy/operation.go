package faultproxy

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// maxParseBytes bounds the request bodies read to classify DynamoDB and SQS
// requests (AWS caps them at 16 MB and 1 MB). Larger bodies are streamed
// unparsed.
const maxParseBytes = 32 << 20

// maxErrorCapture bounds the head of a 200 response kept to find an S3
// <Error> document in it.
const maxErrorCapture = 64 << 10

// operation classifies r. For DynamoDB and SQS it reads the body, replacing
// r.Body with a replay of it, and returns the bytes read (nil when the body
// was empty or too large to parse).
func (p *Proxy) operation(r *http.Request) (Operation, []byte, error) {
	switch p.service {
	case DynamoDB:
		return dynamoOperation(r)
	case SQS:
		return sqsOperation(r)
	default:
		return s3Operation(r), nil, nil
	}
}

// replayBody serves a body that was read ahead, then what is left of the
// original, which it closes.
type replayBody struct {
	io.Reader
	orig io.Closer
}

func (b *replayBody) Close() error { return b.orig.Close() }

// bufferBody reads r's body into memory when it is no larger than
// maxParseBytes. complete reports whether body holds all of it.
func bufferBody(r *http.Request) (body []byte, complete bool, err error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, true, nil
	}
	if r.ContentLength > maxParseBytes {
		return nil, false, nil
	}
	orig := r.Body
	buf, err := io.ReadAll(io.LimitReader(orig, maxParseBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("read request body: %w", err)
	}
	if len(buf) > maxParseBytes {
		r.Body = &replayBody{Reader: io.MultiReader(bytes.NewReader(buf), orig), orig: orig}
		return nil, false, nil
	}
	r.Body = &replayBody{Reader: bytes.NewReader(buf), orig: orig}
	return buf, true, nil
}

// targetAction returns the operation named by an X-Amz-Target header such
// as "DynamoDB_20120810.PutItem" or "AmazonSQS.ReceiveMessage".
func targetAction(target string) string {
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

func dynamoOperation(r *http.Request) (Operation, []byte, error) {
	op := Operation{Service: DynamoDB, Action: targetAction(r.Header.Get("X-Amz-Target"))}
	body, complete, err := bufferBody(r)
	if err != nil {
		return op, nil, err
	}
	if !complete || len(body) == 0 {
		return op, nil, nil
	}
	op.Table, op.Tables = dynamoTables(body)
	return op, body, nil
}

// dynamoTables returns the tables a DynamoDB request addresses: its
// TableName, the keys of RequestItems (batches) and the TableName of each
// TransactItems action. table is the only one, or "" when there are several.
func dynamoTables(body []byte) (table string, tables []string) {
	var req struct {
		TableName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "", nil
	}
	if req.TableName != "" {
		return req.TableName, []string{req.TableName}
	}
	for t := range req.RequestItems {
		tables = append(tables, t)
	}
	for _, item := range req.TransactItems {
		for _, action := range item {
			if action.TableName != "" {
				tables = append(tables, action.TableName)
			}
		}
	}
	slices.Sort(tables)
	tables = slices.Compact(tables)
	if len(tables) == 1 {
		table = tables[0]
	}
	return table, tables
}

// sqsJSON reports whether r uses SQS's JSON protocol (as aws-sdk-go-v2 does)
// rather than the query protocol.
func sqsJSON(r *http.Request) bool {
	if r.Header.Get("X-Amz-Target") != "" {
		return true
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return strings.HasPrefix(ct, "application/x-amz-json")
}

func sqsOperation(r *http.Request) (Operation, []byte, error) {
	op := Operation{Service: SQS}
	if sqsJSON(r) {
		op.Action = targetAction(r.Header.Get("X-Amz-Target"))
		body, complete, err := bufferBody(r)
		if err != nil {
			return op, nil, err
		}
		if !complete || len(body) == 0 {
			return op, nil, nil
		}
		var req struct{ QueueUrl string }
		if json.Unmarshal(body, &req) == nil {
			op.QueueURL = req.QueueUrl
		}
		return op, body, nil
	}

	// Query protocol: the fields are in the URL or a form-encoded body.
	fields := r.URL.Query()
	var body []byte
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method == http.MethodPost && ct == "application/x-www-form-urlencoded" {
		b, complete, err := bufferBody(r)
		if err != nil {
			return op, nil, err
		}
		if complete {
			body = b
			if form, err := url.ParseQuery(string(b)); err == nil {
				for k, v := range form {
					fields[k] = append(fields[k], v...)
				}
			}
		}
	}
	op.Action = fields.Get("Action")
	op.QueueURL = fields.Get("QueueUrl")
	if op.QueueURL == "" && r.URL.Path != "" && r.URL.Path != "/" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		op.QueueURL = scheme + "://" + r.Host + r.URL.Path
	}
	return op, body, nil
}

// s3Operation classifies an S3 request by method, path, query and headers.
// Path-style addressing is assumed unless Host is <bucket>.localhost.
func s3Operation(r *http.Request) Operation {
	op := Operation{Service: S3}
	path := strings.TrimPrefix(r.URL.Path, "/")
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if b, ok := strings.CutSuffix(host, ".localhost"); ok && b != "" {
		op.Bucket, op.Key = b, path
	} else {
		op.Bucket, op.Key, _ = strings.Cut(path, "/")
	}
	op.Action = S3Action(r.Method, op.Bucket, op.Key, r.URL.Query(), r.Header)
	return op
}

// s3BucketSubresources maps a bucket subresource to its Get, Put and Delete
// operations ("" where S3 has none).
var s3BucketSubresources = map[string][3]string{
	"accelerate":          {"GetBucketAccelerateConfiguration", "PutBucketAccelerateConfiguration", ""},
	"acl":                 {"GetBucketAcl", "PutBucketAcl", ""},
	"analytics":           {"GetBucketAnalyticsConfiguration", "PutBucketAnalyticsConfiguration", "DeleteBucketAnalyticsConfiguration"},
	"cors":                {"GetBucketCors", "PutBucketCors", "DeleteBucketCors"},
	"encryption":          {"GetBucketEncryption", "PutBucketEncryption", "DeleteBucketEncryption"},
	"intelligent-tiering": {"GetBucketIntelligentTieringConfiguration", "PutBucketIntelligentTieringConfiguration", "DeleteBucketIntelligentTieringConfiguration"},
	"inventory":           {"GetBucketInventoryConfiguration", "PutBucketInventoryConfiguration", "DeleteBucketInventoryConfiguration"},
	"lifecycle":           {"GetBucketLifecycleConfiguration", "PutBucketLifecycleConfiguration", "DeleteBucketLifecycle"},
	"location":            {"GetBucketLocation", "", ""},
	"logging":             {"GetBucketLogging", "PutBucketLogging", ""},
	"metrics":             {"GetBucketMetricsConfiguration", "PutBucketMetricsConfiguration", "DeleteBucketMetricsConfiguration"},
	"notification":        {"GetBucketNotificationConfiguration", "PutBucketNotificationConfiguration", ""},
	"object-lock":         {"GetObjectLockConfiguration", "PutObjectLockConfiguration", ""},
	"ownershipControls":   {"GetBucketOwnershipControls", "PutBucketOwnershipControls", "DeleteBucketOwnershipControls"},
	"policy":              {"GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"},
	"policyStatus":        {"GetBucketPolicyStatus", "", ""},
	"publicAccessBlock":   {"GetPublicAccessBlock", "PutPublicAccessBlock", "DeletePublicAccessBlock"},
	"replication":         {"GetBucketReplication", "PutBucketReplication", "DeleteBucketReplication"},
	"requestPayment":      {"GetBucketRequestPayment", "PutBucketRequestPayment", ""},
	"tagging":             {"GetBucketTagging", "PutBucketTagging", "DeleteBucketTagging"},
	"versioning":          {"GetBucketVersioning", "PutBucketVersioning", ""},
	"website":             {"GetBucketWebsite", "PutBucketWebsite", "DeleteBucketWebsite"},
}

// s3ObjectSubresources maps an object subresource to its Get, Put and
// Delete operations.
var s3ObjectSubresources = map[string][3]string{
	"acl":        {"GetObjectAcl", "PutObjectAcl", ""},
	"attributes": {"GetObjectAttributes", "", ""},
	"legal-hold": {"GetObjectLegalHold", "PutObjectLegalHold", ""},
	"retention":  {"GetObjectRetention", "PutObjectRetention", ""},
	"tagging":    {"GetObjectTagging", "PutObjectTagging", "DeleteObjectTagging"},
	"torrent":    {"GetObjectTorrent", "", ""},
}

func subresource(table map[string][3]string, q url.Values, method string) (string, bool) {
	col, ok := map[string]int{http.MethodGet: 0, http.MethodPut: 1, http.MethodDelete: 2}[method]
	if !ok {
		return "", false
	}
	// Sorted so the result does not depend on map order.
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if ops, ok := table[k]; ok && ops[col] != "" {
			return ops[col], true
		}
	}
	return "", false
}

// S3Action names the S3 operation of a request to bucket and key (both
// unescaped; key "" for bucket operations), as S3's API reference names it.
func S3Action(method, bucket, key string, q url.Values, h http.Header) string {
	switch {
	case bucket == "":
		if method == http.MethodGet {
			return "ListBuckets"
		}
		return ""
	case key == "":
		return s3BucketAction(method, q)
	}
	return s3ObjectAction(method, q, h)
}

// s3BucketAction names the S3 operation of a request to a bucket.
func s3BucketAction(method string, q url.Values) string {
	if op, ok := subresource(s3BucketSubresources, q, method); ok {
		return op
	}
	switch method {
	case http.MethodGet:
		switch {
		case q.Get("list-type") == "2":
			return "ListObjectsV2"
		case q.Has("versions"):
			return "ListObjectVersions"
		case q.Has("uploads"):
			return "ListMultipartUploads"
		}
		return "ListObjects"
	case http.MethodPut:
		return "CreateBucket"
	case http.MethodDelete:
		return "DeleteBucket"
	case http.MethodHead:
		return "HeadBucket"
	case http.MethodPost:
		if q.Has("delete") {
			return "DeleteObjects"
		}
		return "PostObject"
	}
	return ""
}

// s3ObjectAction names the S3 operation of a request to an object.
func s3ObjectAction(method string, q url.Values, h http.Header) string {
	multipart := q.Has("uploadId")
	switch method {
	case http.MethodPut:
		copySource := h.Get("X-Amz-Copy-Source") != ""
		switch {
		case multipart && q.Has("partNumber") && copySource:
			return "UploadPartCopy"
		case multipart && q.Has("partNumber"):
			return "UploadPart"
		}
		if op, ok := subresource(s3ObjectSubresources, q, method); ok {
			return op
		}
		if copySource {
			return "CopyObject"
		}
		return "PutObject"
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return "CreateMultipartUpload"
		case multipart:
			return "CompleteMultipartUpload"
		case q.Has("restore"):
			return "RestoreObject"
		case q.Has("select"):
			return "SelectObjectContent"
		}
		return ""
	case http.MethodGet:
		if multipart {
			return "ListParts"
		}
		if op, ok := subresource(s3ObjectSubresources, q, method); ok {
			return op
		}
		return "GetObject"
	case http.MethodHead:
		return "HeadObject"
	case http.MethodDelete:
		if multipart {
			return "AbortMultipartUpload"
		}
		if op, ok := subresource(s3ObjectSubresources, q, method); ok {
			return op
		}
		return "DeleteObject"
	}
	return ""
}

// responseTap counts a response body as it is copied and keeps its first
// keep bytes.
type responseTap struct {
	rc       io.ReadCloser
	n        int64
	keep     int
	captured []byte
	err      error
}

func (t *responseTap) Read(b []byte) (int, error) {
	n, err := t.rc.Read(b)
	t.n += int64(n)
	if t.keep > 0 && n > 0 {
		k := min(n, t.keep)
		t.captured = append(t.captured, b[:k]...)
		t.keep -= k
	}
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

func (t *responseTap) Close() error { return t.rc.Close() }

// s3ErrorCode returns the code of the S3 <Error> document at the head of
// body, or "" when body holds something else. S3 may send whitespace before
// the document while it works.
func s3ErrorCode(body []byte) string {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 {
		return ""
	}
	dec := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if start.Name.Local != "Error" {
			return ""
		}
		var doc struct{ Code string }
		if err := dec.DecodeElement(&doc, &start); err != nil || doc.Code == "" {
			return "UnknownError"
		}
		return doc.Code
	}
}
