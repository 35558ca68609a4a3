package objectslambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/platform/jsonerr"
)

// Documents is what the API needs from the store; *objects.Store
// satisfies it.
type Documents interface {
	Write(ctx context.Context, key string, body []byte, o objects.PutOptions) (objects.Written, error)
	Stat(ctx context.Context, key string, version int64) (objects.Record, error)
	Fetch(ctx context.Context, rec objects.Record, version int64) (objects.Object, error)
	FetchRange(ctx context.Context, rec objects.Record, version int64, r objects.Range) (objects.Partial, error)
	Versions(ctx context.Context, key string) ([]objects.Record, error)
	Delete(ctx context.Context, key string, o objects.DeleteOptions) (int64, error)
}

// Uploads grants and completes presigned uploads; *objects.Uploader
// satisfies it.
type Uploads interface {
	Begin(ctx context.Context, key string, r objects.UploadRequest) (objects.Grant, error)
	Status(ctx context.Context, key, id string) (objects.Upload, error)
	Complete(ctx context.Context, key, id string, parts []objects.Part) (objects.Upload, error)
}

// Listings lists objects by prefix; *objects.Lister satisfies it.
type Listings interface {
	List(ctx context.Context, o objects.ListOptions) (objects.Page, error)
}

// Links presigns downloads; *objectss3.Transfers satisfies it.
type Links interface {
	PresignGet(ctx context.Context, ref objects.BlobRef, ttl time.Duration) (objects.SignedRequest, error)
}

var (
	_ Documents = (*objects.Store)(nil)
	_ Uploads   = (*objects.Uploader)(nil)
	_ Listings  = (*objects.Lister)(nil)
)

// HTTP serves /objects (listings) and /objects/{key+}.
type HTTP struct {
	Docs    Documents
	Uploads Uploads
	List    Listings
	Links   Links
	// MaxBody is the largest PUT body (default DefaultMaxBody).
	MaxBody int
	// MaxResponse is the largest document returned in a response; bigger
	// documents in S3 get a presigned link (default DefaultMaxResponse).
	MaxResponse int64
	// LinkTTL is how long a download link lives (default 5 minutes).
	LinkTTL time.Duration
	Metrics *emf.Writer // nil: no metrics
	Log     *slog.Logger
}

// Defaults. Lambda takes and returns at most 6 MB (6,291,456 bytes) of
// JSON; API Gateway carries binary bodies base64-encoded, 4/3 of their
// size, and the event or response adds headers: 4 MiB of document is 5.6 MB
// encoded, which leaves room for up to about 600 KB of headers.
const (
	DefaultMaxBody     = 4 << 20
	DefaultMaxResponse = 4 << 20
	DefaultLinkTTL     = 5 * time.Minute
	maxJSONBody        = 1 << 20
)

// apiError is a refusal decided by the adapter itself (the domain's own
// refusals are *objects.InvalidError).
type apiError struct {
	status int
	reason string
	msg    string
	header map[string]string
}

func (e *apiError) Error() string { return e.reason + ": " + e.msg }

// headedError is an error whose response carries a header (a 416's
// Content-Range); classify sees the error it wraps.
type headedError struct {
	err    error
	header map[string]string
}

func (e *headedError) Error() string { return e.err.Error() }
func (e *headedError) Unwrap() error { return e.err }

func withHeader(err error, name, value string) error {
	return &headedError{err: err, header: map[string]string{name: value}}
}

func refuse(status int, reason, format string, args ...any) *apiError {
	return &apiError{status: status, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// resource is what a path names.
type resource int

const (
	document resource = iota
	versions
	uploads
	upload // ?uploadId=ID: GET its status, POST its completion
)

// target reads what a request names: the key is the whole path parameter
// (any string, so nothing in the path can name a sub-resource), and a
// sub-resource is a query parameter, as S3's are: ?versions, ?uploads,
// ?uploadId=ID. Each resource takes its own parameters and no others.
func target(q map[string]string) (res resource, uploadID string, err error) {
	var subs []string
	for _, name := range []string{objectsapi.QueryVersions, objectsapi.QueryUploads, objectsapi.QueryUploadID} {
		if _, ok := q[name]; ok {
			subs = append(subs, name)
		}
	}
	if len(subs) > 1 {
		return 0, "", refuse(http.StatusBadRequest, objectsapi.ReasonBadQuery, "?%s and ?%s name two sub-resources; send one", subs[0], subs[1])
	}
	res = document
	if len(subs) == 1 {
		switch subs[0] {
		case objectsapi.QueryVersions:
			res = versions
		case objectsapi.QueryUploads:
			res = uploads
		default:
			res, uploadID = upload, q[objectsapi.QueryUploadID]
		}
	}
	for name := range q {
		if !slices.Contains(params[res], name) {
			return 0, "", refuse(http.StatusBadRequest, objectsapi.ReasonBadQuery, "unknown query parameter %q: %s takes %s",
				truncate(name, 32), resourceName[res], strings.Join(params[res], ", "))
		}
	}
	return res, uploadID, nil
}

// params are the query parameters each resource takes.
var params = map[resource][]string{
	document: {"version", "placement"},
	versions: {objectsapi.QueryVersions},
	uploads:  {objectsapi.QueryUploads},
	upload:   {objectsapi.QueryUploadID},
}

var resourceName = map[resource]string{
	document: "an object",
	versions: "?versions",
	uploads:  "?uploads",
	upload:   "?uploadId",
}

var allowed = map[resource]string{
	document: "GET, HEAD, PUT, DELETE",
	versions: "GET",
	uploads:  "POST",
	upload:   "GET, POST",
}

// Handle serves one request.
func (h *HTTP) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if req.RouteKey == "GET /health" {
		return apigw.JSON(http.StatusOK, map[string]string{"status": "ok", "function": "objects-api"}), nil
	}
	method := req.RequestContext.HTTP.Method
	if req.RouteKey == "GET /objects" {
		resp, err := h.list(ctx, req)
		if err != nil {
			return h.fail(ctx, req, err), nil
		}
		return resp, nil
	}
	key := req.PathParameters["key"]
	res, id, err := target(req.QueryStringParameters)
	if err != nil {
		return h.fail(ctx, req, err), nil
	}
	var resp events.APIGatewayV2HTTPResponse
	switch {
	case res == document && (method == http.MethodGet || method == http.MethodHead):
		resp, err = h.get(ctx, req, key, method == http.MethodHead)
	case res == document && method == http.MethodPut:
		resp, err = h.put(ctx, req, key)
	case res == document && method == http.MethodDelete:
		resp, err = h.delete(ctx, req, key)
	case res == versions && method == http.MethodGet:
		resp, err = h.versions(ctx, key)
	case res == uploads && method == http.MethodPost:
		resp, err = h.beginUpload(ctx, req, key)
	case res == upload && method == http.MethodGet:
		resp, err = h.uploadStatus(ctx, key, id)
	case res == upload && method == http.MethodPost:
		resp, err = h.completeUpload(ctx, req, key, id)
	default:
		err = &apiError{status: http.StatusMethodNotAllowed, reason: objectsapi.ReasonNoMethod,
			msg: fmt.Sprintf("%s is not allowed here; allowed: %s", method, allowed[res]), header: map[string]string{"allow": allowed[res]}}
	}
	if err != nil {
		return h.fail(ctx, req, err), nil
	}
	return resp, nil
}

// header returns a request header (API Gateway lower-cases names).
func header(req events.APIGatewayV2HTTPRequest, name string) string {
	return strings.TrimSpace(req.Headers[name])
}

// body returns the request body, base64-decoded if API Gateway encoded it,
// refusing more than limit bytes before decoding them.
func body(req events.APIGatewayV2HTTPRequest, limit int, hint string) ([]byte, error) {
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, refuse(http.StatusRequestEntityTooLarge, string(objects.ReasonTooLarge), "the body is %d bytes, the limit is %d%s", len(req.Body), limit, hint)
		}
		return []byte(req.Body), nil
	}
	if n := base64.StdEncoding.DecodedLen(len(req.Body)); n > limit+2 {
		return nil, refuse(http.StatusRequestEntityTooLarge, string(objects.ReasonTooLarge), "the body is about %d bytes, the limit is %d%s", n, limit, hint)
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, objectsapi.ReasonBadBody, "the body is marked base64 but does not decode")
	}
	if len(b) > limit {
		return nil, refuse(http.StatusRequestEntityTooLarge, string(objects.ReasonTooLarge), "the body is %d bytes, the limit is %d%s", len(b), limit, hint)
	}
	return b, nil
}

// ifMatch reads If-Match: a version, bare or quoted as our ETags are. On a
// write (create true), version 0 is "only if the object does not exist",
// as If-None-Match: * and the CLI's -if-match 0 say it.
func ifMatch(v string, create bool) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	if v == "*" {
		return nil, refuse(http.StatusBadRequest, objectsapi.ReasonUnsupportedIf, "If-Match: * is not supported; send the version the change is based on")
	}
	bare := strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	if bare == "0" {
		if !create {
			return nil, refuse(http.StatusBadRequest, objectsapi.ReasonBadIfMatch, "If-Match: 0 (no object yet) means nothing on a delete; send the version to delete")
		}
		return new(int64), nil
	}
	n, err := objects.ParseVersion(bare)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, objectsapi.ReasonBadIfMatch, "If-Match %q is not a version (1 to %d, as the ETag gives it)", truncate(v, 32), int64(objects.MaxVersion))
	}
	return &n, nil
}

func (h *HTTP) put(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string) (events.APIGatewayV2HTTPResponse, error) {
	if err := objects.ValidateKey(key); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	match, err := ifMatch(header(req, "if-match"), true)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	create := match != nil && *match == 0
	switch v := header(req, "if-none-match"); {
	case v == "*" && match != nil && *match != 0:
		return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, objectsapi.ReasonBadIfMatch, "send If-Match or If-None-Match: *, not both")
	case v == "*":
		create, match = true, new(int64)
	case v != "":
		return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, objectsapi.ReasonUnsupportedIf, "If-None-Match takes only * (create only)")
	}
	o := objects.PutOptions{IfMatch: match, ContentType: header(req, "content-type")}
	switch p := req.QueryStringParameters["placement"]; p {
	case "", "auto":
	case "table":
		o.KeepInTable = true
	default:
		return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, objectsapi.ReasonBadPlacement, "placement %q: want auto or table", truncate(p, 32))
	}
	doc, err := body(req, limit, fmt.Sprintf(`; send bigger documents through a presigned upload: POST %s?uploads with {"size":N,"sha256":"<hex>"} (ddbpipe objects upload does it)`, objectsapi.KeyPath(key)))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	w, err := h.Docs.Write(ctx, key, doc, o)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if w.Unchanged {
		// The latest version already holds this document: nothing was
		// written (a retry whose first attempt committed, or a no-op).
		h.emit(emf.Metric{Name: "WritesUnchanged", Unit: emf.Count, Value: 1})
		m := meta(w.Record)
		m.Unchanged = true
		resp := apigw.JSON(http.StatusOK, m)
		resp.Headers["etag"] = etag(w.Version)
		resp.Headers[strings.ToLower(objectsapi.HeaderUnchanged)] = "true"
		return resp, nil
	}
	h.placed(ctx, w)
	status := http.StatusOK
	if w.Version == 1 || create {
		status = http.StatusCreated
	}
	resp := apigw.JSON(status, meta(w.Record))
	resp.Headers["etag"] = etag(w.Version)
	return resp, nil
}

func (h *HTTP) get(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string, headOnly bool) (events.APIGatewayV2HTTPResponse, error) {
	var version int64
	if v, ok := req.QueryStringParameters["version"]; ok {
		n, err := objects.ParseVersion(v)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		version = n
	}
	// Range applies to GET alone (RFC 9110): HEAD answers the whole
	// document's headers whatever it says.
	var spec objects.RangeSpec
	ranged := false
	if !headOnly {
		var err error
		if spec, ranged, err = objects.ParseRange(header(req, "range")); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	rec, err := h.Docs.Stat(ctx, key, version)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	limit := h.MaxResponse
	if limit <= 0 {
		limit = DefaultMaxResponse
	}
	headers := map[string]string{
		"content-type":     rec.ContentType,
		"etag":             etag(rec.Version),
		"x-object-version": strconv.FormatInt(rec.Version, 10),
		"x-object-sha256":  rec.SHA256.String(),
		"x-object-kind":    string(rec.Kind),
		"x-object-size":    strconv.FormatInt(rec.Size, 10),
		"last-modified":    rec.CreatedAt.UTC().Format(http.TimeFormat),
		"accept-ranges":    "bytes",
	}
	if headOnly {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: headers}, nil
	}
	var r objects.Range
	if ranged && !ifRange(header(req, "if-range"), rec.Version) {
		ranged = false // the client's copy is stale: the whole document replaces it
	}
	if ranged {
		if r, ranged, err = spec.Resolve(rec.Size); err != nil {
			return events.APIGatewayV2HTTPResponse{}, withHeader(err, "content-range", fmt.Sprintf("bytes */%d", rec.Size))
		}
	}
	if rec.Kind == objects.InS3 && rec.Blob != nil && rec.Size > limit {
		// Too big to answer here: a presigned URL, to which the client
		// sends its Range again (S3 serves ranges itself).
		ttl := h.LinkTTL
		if ttl <= 0 {
			ttl = DefaultLinkTTL
		}
		link, err := h.Links.PresignGet(ctx, *rec.Blob, ttl)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		resp := apigw.JSON(http.StatusSeeOther, objectsapi.Link{
			URL: link.URL, ExpiresAt: link.Expires.UTC(), Size: rec.Size, SHA256: rec.SHA256.String(),
			Version: rec.Version, ContentType: rec.ContentType,
		})
		for k, v := range headers {
			if k != "content-type" {
				resp.Headers[k] = v
			}
		}
		resp.Headers["location"] = link.URL
		resp.Headers["cache-control"] = "no-store"
		return resp, nil
	}
	if ranged {
		// A range longer than a response carries is cut to its first
		// limit bytes; Content-Range says which came.
		r.End = min(r.End, r.Start+limit)
		part, err := h.Docs.FetchRange(ctx, rec, version, r)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		headers["etag"] = etag(part.Version)
		headers["x-object-version"] = strconv.FormatInt(part.Version, 10)
		headers["x-object-sha256"] = part.SHA256.String()
		headers["x-object-size"] = strconv.FormatInt(part.Size, 10)
		headers["content-range"] = objectsapi.ContentRange(part.Range.Start, part.Range.End, part.Size)
		h.emit(emf.Metric{Name: "RangeReads", Unit: emf.Count, Value: 1}, emf.Metric{Name: "RangeBytes", Unit: emf.Bytes, Value: float64(len(part.Body))})
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusPartialContent, Headers: headers,
			Body: base64.StdEncoding.EncodeToString(part.Body), IsBase64Encoded: true}, nil
	}
	obj, err := h.Docs.Fetch(ctx, rec, version)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	headers["etag"] = etag(obj.Version)
	headers["x-object-version"] = strconv.FormatInt(obj.Version, 10)
	resp := events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: headers}
	if len(obj.Body) > 0 {
		resp.Body = base64.StdEncoding.EncodeToString(obj.Body)
		resp.IsBase64Encoded = true
	}
	return resp, nil
}

// ifRange reports whether a range may be served given If-Range (RFC 9110,
// section 13.1.5): with no If-Range, always; with our ETag (the version,
// "n"), only if it is the version being read. A date, a weak or another
// tag means the client's copy may differ: the whole document is sent.
func ifRange(v string, version int64) bool {
	return v == "" || v == etag(version)
}

func (h *HTTP) delete(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string) (events.APIGatewayV2HTTPResponse, error) {
	match, err := ifMatch(header(req, "if-match"), false)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	v, err := h.Docs.Delete(ctx, key, objects.DeleteOptions{IfMatch: match})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return apigw.JSON(http.StatusOK, objectsapi.Deleted{Key: key, Version: v}), nil
}

func (h *HTTP) versions(ctx context.Context, key string) (events.APIGatewayV2HTTPResponse, error) {
	recs, err := h.Docs.Versions(ctx, key)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := objectsapi.VersionList{Key: key, Versions: make([]objectsapi.Meta, len(recs))}
	for i, r := range recs {
		out.Versions[i] = meta(r)
	}
	return apigw.JSON(http.StatusOK, out), nil
}

// list serves GET /objects: one page of a listing by prefix.
func (h *HTTP) list(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	q := req.QueryStringParameters
	for name := range q {
		switch name {
		case "prefix", "delimiter", "limit", "cursor":
		default:
			return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, objectsapi.ReasonBadQuery,
				"unknown query parameter %q: a listing takes prefix, delimiter, limit and cursor", name)
		}
	}
	o := objects.ListOptions{Prefix: q["prefix"], Delimiter: q["delimiter"], Cursor: q["cursor"]}
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, string(objects.ReasonBadLimit),
				"limit %q is not a number: 1 to %d", s, objects.MaxListLimit)
		}
		if n == 0 {
			n = -1 // 0 means the default in ListOptions; in the query it is out of range
		}
		o.Limit = n
	}
	page, err := h.List.List(ctx, o)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := objectsapi.Listing{Prefix: o.Prefix, Delimiter: o.Delimiter, Objects: make([]objectsapi.Entry, len(page.Entries)),
		CommonPrefixes: page.Prefixes, Cursor: page.Cursor}
	for i, e := range page.Entries {
		out.Objects[i] = objectsapi.Entry{Key: e.Key, Version: e.Version, Size: e.Size, SHA256: e.SHA256.String(),
			ContentType: e.ContentType, Modified: e.Modified.UTC()}
	}
	return apigw.JSON(http.StatusOK, out), nil
}

// decodeJSON reads a small JSON request body strictly.
func decodeJSON(req events.APIGatewayV2HTTPRequest, v any, want string) error {
	raw, err := body(req, maxJSONBody, "")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return refuse(http.StatusBadRequest, objectsapi.ReasonMissingBody, "missing body: want %s", want)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(http.StatusBadRequest, objectsapi.ReasonInvalidJSON, "malformed JSON (%s): want %s", truncate(jsonerr.Describe(err), 96), want)
	}
	if dec.More() {
		return refuse(http.StatusBadRequest, objectsapi.ReasonInvalidJSON, "more than one JSON value: want %s", want)
	}
	return nil
}

const uploadShape = `{"size":N,"sha256":"<64 hex>","contentType":"type/subtype","ifMatch":n}`

func (h *HTTP) beginUpload(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string) (events.APIGatewayV2HTTPResponse, error) {
	if err := objects.ValidateKey(key); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	var in objectsapi.UploadRequest
	if err := decodeJSON(req, &in, uploadShape); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if in.Size == nil {
		return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, objectsapi.ReasonInvalidJSON, "size is missing: want %s", uploadShape)
	}
	sum, err := objects.ParseSum(strings.ToLower(in.SHA256))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, refuse(http.StatusBadRequest, string(objects.ReasonBadSHA256), "sha256 must be 64 hex characters (the document's SHA-256)")
	}
	g, err := h.Uploads.Begin(ctx, key, objects.UploadRequest{Size: *in.Size, SHA256: sum, ContentType: in.ContentType, IfMatch: in.IfMatch})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	h.emit(emf.Metric{Name: "UploadsGranted", Unit: emf.Count, Value: 1})
	resp := apigw.JSON(http.StatusCreated, granted(g, objectsapi.UploadPath(key, g.Upload.ID)))
	resp.Headers["location"] = objectsapi.UploadPath(key, g.Upload.ID)
	return resp, nil
}

func (h *HTTP) uploadStatus(ctx context.Context, key, id string) (events.APIGatewayV2HTTPResponse, error) {
	up, err := h.Uploads.Status(ctx, key, id)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return apigw.JSON(http.StatusOK, status(up)), nil
}

const completeShape = `{"parts":[{"partNumber":1,"etag":"…"},…]}`

func (h *HTTP) completeUpload(ctx context.Context, req events.APIGatewayV2HTTPRequest, key, id string) (events.APIGatewayV2HTTPResponse, error) {
	var in objectsapi.CompleteRequest
	if err := decodeJSON(req, &in, completeShape); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	up, err := h.Uploads.Complete(ctx, key, id, parts(in.Parts))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	code := http.StatusAccepted // the finalizer commits it
	if up.State == objects.UploadCommitted {
		code = http.StatusOK // completed before: its outcome
	}
	resp := apigw.JSON(code, status(up))
	resp.Headers["location"] = objectsapi.UploadPath(key, id)
	return resp, nil
}

// placed counts a write by placement, and logs and counts a write whose
// bytes were stored already as a shared blob (no upload).
func (h *HTTP) placed(ctx context.Context, w objects.Written) {
	rec := w.Record
	ms := []emf.Metric{{Name: placementMetric[rec.Kind], Unit: emf.Count, Value: 1}}
	if rec.Kind == objects.InS3 {
		ms = append(ms, emf.Metric{Name: "BytesOffloaded", Unit: emf.Bytes, Value: float64(rec.Size)})
	}
	if w.BlobShared {
		h.Log.InfoContext(ctx, "blob upload skipped: the bytes are stored already", "key", rec.Key, "version", rec.Version, "blob", rec.Blob.Key, "bytes", rec.Blob.Size)
		ms = append(ms, emf.Metric{Name: "BlobUploadsSkipped", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "BlobBytesShared", Unit: emf.Bytes, Value: float64(rec.Blob.Size)})
	}
	h.emit(ms...)
}

var placementMetric = map[objects.Kind]string{
	objects.Inline: "PlacedInline", objects.CompressedInline: "PlacedCompressed",
	objects.Chunked: "PlacedChunked", objects.InS3: "PlacedS3",
}

func (h *HTTP) emit(ms ...emf.Metric) {
	if h.Metrics == nil {
		return
	}
	if err := h.Metrics.Emit(ms, nil); err != nil {
		h.Log.Warn("metrics not written", "err", err)
	}
}

// fail maps an error to a response: the one place errors become statuses.
// Clients see stable reasons and messages meant for them; anything else
// is logged and answered 500 without detail.
func (h *HTTP) fail(ctx context.Context, req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	st, e := classify(err)
	switch {
	case st == http.StatusConflict && e.Error == objectsapi.ReasonConflict:
		h.emit(emf.Metric{Name: "Conflicts", Unit: emf.Count, Value: 1})
	case e.Error == objectsapi.ReasonChecksum:
		h.emit(emf.Metric{Name: "ChecksumFailures", Unit: emf.Count, Value: 1})
	}
	switch {
	case st >= 500:
		h.Log.ErrorContext(ctx, "request failed", "method", req.RequestContext.HTTP.Method, "path", truncate(req.RawPath, 256), "status", st, "err", err)
	case st == http.StatusServiceUnavailable:
		h.Log.WarnContext(ctx, "request refused for load", "err", err)
	}
	resp := apigw.JSON(st, e)
	var ae *apiError
	if errors.As(err, &ae) {
		for k, v := range ae.header {
			resp.Headers[k] = v
		}
	}
	var he *headedError
	if errors.As(err, &he) {
		for k, v := range he.header {
			resp.Headers[k] = v
		}
	}
	if st == http.StatusServiceUnavailable {
		resp.Headers["retry-after"] = "1"
	}
	return resp
}

// classify is the error model: status and body for every error.
func classify(err error) (int, objectsapi.ErrorBody) {
	var ae *apiError
	var ie *objects.InvalidError
	var ce *objects.ConflictError
	switch {
	case errors.As(err, &ae):
		return ae.status, objectsapi.ErrorBody{Error: ae.reason, Message: ae.msg}
	case errors.As(err, &ce):
		cur := ce.Current
		body := objectsapi.ErrorBody{Error: objectsapi.ReasonConflict, Message: conflictMessage(ce), CurrentVersion: &cur}
		if ce.Deleted {
			body.Deleted = true
		}
		return http.StatusConflict, body
	case errors.As(err, &ie):
		body := objectsapi.ErrorBody{Error: string(ie.Reason), Message: ie.Detail}
		switch ie.Reason {
		case objects.ReasonTooLarge, objects.ReasonTooLargeForTable:
			return http.StatusRequestEntityTooLarge, body
		case objects.ReasonBadContentType:
			return http.StatusUnsupportedMediaType, body
		case objects.ReasonUploadClosed:
			return http.StatusConflict, body
		case objects.ReasonRangeNotSatisfiable, objects.ReasonMultipleRanges:
			return http.StatusRequestedRangeNotSatisfiable, body
		}
		return http.StatusBadRequest, body
	case errors.Is(err, objects.ErrNotFound):
		return http.StatusNotFound, objectsapi.ErrorBody{Error: objectsapi.ReasonNotFound, Message: "no such object, version or upload"}
	case errors.Is(err, objects.ErrThrottled), errors.Is(err, objects.ErrUploadBusy):
		return http.StatusServiceUnavailable, objectsapi.ErrorBody{Error: objectsapi.ReasonThrottled, Message: "busy; retry shortly"}
	case errors.Is(err, objects.ErrChecksum):
		return http.StatusInternalServerError, objectsapi.ErrorBody{Error: objectsapi.ReasonChecksum, Message: "the stored document failed verification; it is not returned"}
	}
	return http.StatusInternalServerError, objectsapi.ErrorBody{Error: objectsapi.ReasonInternal, Message: "internal error"}
}

func conflictMessage(ce *objects.ConflictError) string {
	switch {
	case ce.Current == 0:
		return "the object does not exist"
	case ce.Deleted:
		return fmt.Sprintf("the object was deleted at version %d", ce.Current)
	case ce.Expected == 0:
		return fmt.Sprintf("the object exists, at version %d", ce.Current)
	case ce.Expected > 0:
		return fmt.Sprintf("expected version %d, the object is at version %d", ce.Expected, ce.Current)
	}
	return fmt.Sprintf("the object is at version %d", ce.Current)
}

func etag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
