package objectslambda

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// get serves GET and HEAD of a document: HEAD its headers; GET the
// document, the part of it a Range names, or a link to it when it is too
// big to answer here.
func (h *HTTP) get(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string, headOnly bool) (events.APIGatewayV2HTTPResponse, error) {
	version, err := queryVersion(req.QueryStringParameters)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	// Range applies to GET alone (RFC 9110): HEAD answers the whole
	// document's headers whatever it says.
	var spec objects.RangeSpec
	ranged := false
	if !headOnly {
		if spec, ranged, err = objects.ParseRange(apigw.Header(req, "range")); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	rec, err := h.Docs.Stat(ctx, key, version)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	headers := documentHeaders(rec)
	if headOnly {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: headers}, nil
	}
	r, ranged, err := servedRange(spec, ranged, apigw.Header(req, "if-range"), rec)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	switch {
	case rec.Kind == objects.InS3 && rec.Blob != nil && rec.Size > h.maxResponse():
		return h.link(ctx, rec, headers)
	case ranged:
		return h.partial(ctx, rec, version, r, headers)
	}
	return h.whole(ctx, rec, version, headers)
}

// queryVersion reads ?version=; without it, 0: the latest version.
func queryVersion(q map[string]string) (int64, error) {
	v, ok := q["version"]
	if !ok {
		return 0, nil
	}
	return objects.ParseVersion(v)
}

// documentHeaders are the headers that describe rec, in every answer to a
// GET or HEAD of it.
func documentHeaders(rec objects.Record) map[string]string {
	return map[string]string{
		"content-type":     rec.ContentType,
		"etag":             etag(rec.Version),
		"x-object-version": strconv.FormatInt(rec.Version, 10),
		"x-object-sha256":  rec.SHA256.String(),
		"x-object-kind":    string(rec.Kind),
		"x-object-size":    strconv.FormatInt(rec.Size, 10),
		"last-modified":    rec.CreatedAt.UTC().Format(http.TimeFormat),
		"accept-ranges":    "bytes",
	}
}

// link answers a document too big for a response with a presigned URL to
// its blob, to which the client sends its Range again (S3 serves ranges
// itself).
func (h *HTTP) link(ctx context.Context, rec objects.Record, headers map[string]string) (events.APIGatewayV2HTTPResponse, error) {
	link, err := h.Links.PresignGet(ctx, *rec.Blob, h.linkTTL())
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

// whole answers the whole document.
func (h *HTTP) whole(ctx context.Context, rec objects.Record, version int64, headers map[string]string) (events.APIGatewayV2HTTPResponse, error) {
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

// put serves PUT of a document: a new version, or none if the latest
// already holds it.
func (h *HTTP) put(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string) (events.APIGatewayV2HTTPResponse, error) {
	if err := objects.ValidateKey(key); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	match, create, err := writeConditions(req)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	o := objects.PutOptions{IfMatch: match, ContentType: apigw.Header(req, "content-type")}
	if o.KeepInTable, err = keepInTable(req.QueryStringParameters["placement"]); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	doc, err := apigw.Body(req, h.maxBody(), fmt.Sprintf(`; send bigger documents through a presigned upload: POST %s?uploads with {"size":N,"sha256":"<hex>"} (ddbpipe objects upload does it)`, objectsapi.KeyPath(key)))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	w, err := h.Docs.Write(ctx, key, doc, o)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if w.Unchanged {
		return h.unchanged(w), nil
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

// writeConditions reads a PUT's If-Match and If-None-Match: the version
// the write is based on (nil: any), and create, whether it may only
// create the object.
func writeConditions(req events.APIGatewayV2HTTPRequest) (match *int64, create bool, err error) {
	if match, err = ifMatch(apigw.Header(req, "if-match"), true); err != nil {
		return nil, false, err
	}
	create = match != nil && *match == 0
	switch v := apigw.Header(req, "if-none-match"); {
	case v == "*" && match != nil && *match != 0:
		return nil, false, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadIfMatch, "send If-Match or If-None-Match: *, not both")
	case v == "*":
		create, match = true, new(int64)
	case v != "":
		return nil, false, apigw.Refuse(apigw.Invalid, objectsapi.ReasonUnsupportedIf, "If-None-Match takes only * (create only)")
	}
	return match, create, nil
}

// keepInTable reads ?placement=: auto (or none) lets the store choose,
// table keeps the document in the table.
func keepInTable(placement string) (bool, error) {
	switch placement {
	case "", "auto":
		return false, nil
	case "table":
		return true, nil
	}
	return false, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadPlacement, "placement %q: want auto or table", apigw.Clip(placement, 32))
}

// unchanged answers a PUT whose document the latest version already
// holds: nothing was written (a retry whose first attempt committed, or a
// no-op).
func (h *HTTP) unchanged(w objects.Written) events.APIGatewayV2HTTPResponse {
	h.emit(emf.Metric{Name: "WritesUnchanged", Unit: emf.Count, Value: 1})
	m := meta(w.Record)
	m.Unchanged = true
	resp := apigw.JSON(http.StatusOK, m)
	resp.Headers["etag"] = etag(w.Version)
	resp.Headers[strings.ToLower(objectsapi.HeaderUnchanged)] = "true"
	return resp
}

func (h *HTTP) delete(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string) (events.APIGatewayV2HTTPResponse, error) {
	match, err := ifMatch(apigw.Header(req, "if-match"), false)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	v, err := h.Docs.Delete(ctx, key, objects.DeleteOptions{IfMatch: match})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return apigw.JSON(http.StatusOK, objectsapi.Deleted{Key: key, Version: v}), nil
}

// ifMatch reads If-Match: a version, bare or quoted as our ETags are. On a
// write (create true), version 0 is "only if the object does not exist",
// as If-None-Match: * and the CLI's -if-match 0 say it.
func ifMatch(v string, create bool) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	if v == "*" {
		return nil, apigw.Refuse(apigw.Invalid, objectsapi.ReasonUnsupportedIf, "If-Match: * is not supported; send the version the change is based on")
	}
	bare := strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	if bare == "0" {
		if !create {
			return nil, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadIfMatch, "If-Match: 0 (no object yet) means nothing on a delete; send the version to delete")
		}
		return new(int64), nil
	}
	n, err := objects.ParseVersion(bare)
	if err != nil {
		return nil, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadIfMatch, "If-Match %q is not a version (1 to %d, as the ETag gives it)", apigw.Clip(v, 32), int64(objects.MaxVersion))
	}
	return &n, nil
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

func etag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }
