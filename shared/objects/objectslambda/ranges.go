package objectslambda

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// servedRange is the part of rec a GET answers, partial false for the
// whole document: when no Range was sent (ranged false), when If-Range
// says the client's copy is stale (the whole document replaces it), or
// when rec is empty. A range that names no byte of rec is refused with
// Content-Range: bytes */size.
func servedRange(spec objects.RangeSpec, ranged bool, ifRangeHeader string, rec objects.Record) (r objects.Range, partial bool, err error) {
	if !ranged || !ifRange(ifRangeHeader, rec.Version) {
		return objects.Range{}, false, nil
	}
	if r, partial, err = spec.Resolve(rec.Size); err != nil {
		return objects.Range{}, false, classify(err).WithHeader("content-range", fmt.Sprintf("bytes */%d", rec.Size))
	}
	return r, partial, nil
}

// ifRange reports whether a range may be served given If-Range (RFC 9110,
// section 13.1.5): with no If-Range, always; with our ETag (the version,
// "n"), only if it is the version being read. A date, a weak or another
// tag means the client's copy may differ: the whole document is sent.
func ifRange(v string, version int64) bool {
	return v == "" || v == etag(version)
}

// partial answers the part r of the document, 206 with its Content-Range.
// A range longer than a response carries is cut to its first MaxResponse
// bytes; Content-Range says which came.
func (h *HTTP) partial(ctx context.Context, rec objects.Record, version int64, r objects.Range, headers map[string]string) (events.APIGatewayV2HTTPResponse, error) {
	r.End = min(r.End, r.Start+h.maxResponse())
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
