// Package objectsclient is the Go client of the objects HTTP API (the
// contract is package objectsapi): put, get (following presigned
// downloads and verifying them), byte ranges (GetRange), versions, delete,
// presigned uploads
// (single PUT or multipart, waiting for the finalizer's verdict) and
// read-modify-write with retries on conflict. The ddbpipe CLI uses it.
package objectsclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

// Types of the wire format.
type (
	Meta         = objectsapi.Meta
	UploadStatus = objectsapi.UploadStatus
)

// Client talks to one API.
type Client struct {
	base string
	hc   *http.Client
	// PartConcurrency is how many parts of a multipart upload are sent at
	// once (default 4).
	PartConcurrency int
	// Poll is the interval at which Upload asks for the outcome (default
	// 200 ms).
	Poll time.Duration
}

// New returns a client of the API at baseURL (e.g. API_URL). hc nil uses a
// client with a 5-minute timeout; redirects are never followed blindly
// (Get follows and verifies presigned downloads itself).
func New(baseURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: &c}
}

// NewSigned returns a client of the API at baseURL whose requests to the API
// are signed with SigV4 (execute-api) with cfg's credentials (the standard
// chain) and region, as the API's AWS_IAM authorizer requires. Presigned S3
// URLs are used as they are.
func NewSigned(baseURL string, cfg aws.Config, hc *http.Client) (*Client, error) {
	signed, err := sigv4.Client(cfg, baseURL, hc)
	if err != nil {
		return nil, fmt.Errorf("objects client: %w", err)
	}
	if hc == nil {
		signed.Timeout = 5 * time.Minute
	}
	return New(baseURL, signed), nil
}

// IsConflict reports whether err is a 409 version conflict; current is the
// object's version then.
func IsConflict(err error) (current int64, ok bool) {
	var e *apigw.Error
	if errors.As(err, &e) && e.Status == http.StatusConflict && e.ErrorBody.Error == objectsapi.ReasonConflict {
		if e.CurrentVersion != nil {
			current = *e.CurrentVersion
		}
		return current, true
	}
	return 0, false
}

// IsNotFound reports whether err is a 404.
func IsNotFound(err error) bool {
	var e *apigw.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// path is the URL of key's resource (objectsapi.EscapeKey writes every
// byte of the key so that it arrives as it is), with a sub-resource's
// query if one is given.
func (c *Client) path(key string, query ...string) string {
	u := c.base + objectsapi.KeyPath(key)
	if len(query) > 0 {
		u += "?" + strings.Join(query, "&")
	}
	return u
}

func (c *Client) do(ctx context.Context, method, u string, body io.Reader, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("objects API: %s %s: %w", method, u, err)
	}
	return resp, nil
}

// decode reads a JSON answer into out, or the error body of a refusal.
func decode(resp *http.Response, out any, ok ...int) error {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("objects API: read answer: %w", err)
	}
	good := resp.StatusCode >= 200 && resp.StatusCode < 300
	for _, s := range ok {
		good = good || resp.StatusCode == s
	}
	if !good {
		e, gateway := apigw.ReadError(resp.StatusCode, raw)
		if gateway && e.ErrorBody.Error == apigw.ReasonTooLarge {
			e.Message = "the request is over API Gateway's payload limit " +
				"(about 4.5 MB of body once base64-encoded); send bigger documents through a presigned upload (Client.Upload, ddbpipe objects upload)"
		}
		return fmt.Errorf("objects API: %w", e)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("objects API: answer %d is not the JSON expected: %w", resp.StatusCode, err)
	}
	return nil
}

// PutOptions are a PUT's conditions and metadata.
type PutOptions struct {
	ContentType string
	IfMatch     *int64 // write only if this is the latest version
	CreateOnly  bool   // If-None-Match: *
	KeepInTable bool   // ?placement=table
}

// Put stores body as key's new version (up to the API's body limit; use
// Upload beyond). When the latest version already holds the document (the
// same SHA-256, size and content type), the API writes nothing and the
// answer, Unchanged, names that version: so a PUT whose answer was lost
// may be sent again as it was, with the same If-Match, and it never makes
// a second version nor a conflict with its own first attempt.
func (c *Client) Put(ctx context.Context, key string, body []byte, o PutOptions) (Meta, error) {
	u := c.path(key)
	if o.KeepInTable {
		u += "?placement=table"
	}
	h := http.Header{}
	ct := o.ContentType
	if ct == "" {
		ct = objectsapi.DefaultContentType
	}
	h.Set("Content-Type", ct)
	if o.IfMatch != nil {
		h.Set("If-Match", strconv.Quote(strconv.FormatInt(*o.IfMatch, 10)))
	}
	if o.CreateOnly {
		h.Set("If-None-Match", "*")
	}
	resp, err := c.do(ctx, http.MethodPut, u, bytes.NewReader(body), h)
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	if err := decode(resp, &m); err != nil {
		return Meta{}, err
	}
	m.Unchanged = m.Unchanged || resp.Header.Get(objectsapi.HeaderUnchanged) == "true"
	return m, nil
}

// Object is a document with its metadata.
type Object struct {
	Meta
	Body []byte
}

// Get reads a version of key (0: the latest). A document served as a
// presigned download is fetched from the bucket and verified against the
// size and SHA-256 the API gave.
func (c *Client) Get(ctx context.Context, key string, version int64) (Object, error) {
	u := c.path(key)
	if version > 0 {
		u += "?version=" + strconv.FormatInt(version, 10)
	}
	resp, err := c.do(ctx, http.MethodGet, u, nil, nil)
	if err != nil {
		return Object{}, err
	}
	if resp.StatusCode == http.StatusSeeOther {
		var l objectsapi.Link
		if err := decode(resp, &l, http.StatusSeeOther); err != nil {
			return Object{}, err
		}
		return c.download(ctx, key, l, resp.Header)
	}
	if resp.StatusCode != http.StatusOK {
		return Object{}, decode(resp, nil)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Object{}, fmt.Errorf("objects API: read %s: %w", key, err)
	}
	o := Object{Meta: metaFromHeader(key, resp.Header), Body: body}
	if got := sha256Hex(body); got != o.SHA256 {
		return Object{}, fmt.Errorf("objects API: %s: got sha256 %s, the API says %s", key, got, o.SHA256)
	}
	return o, nil
}

func metaFromHeader(key string, h http.Header) Meta {
	m := Meta{Key: key, SHA256: h.Get("X-Object-Sha256"), ContentType: h.Get("Content-Type"), Kind: h.Get("X-Object-Kind")}
	m.Version, _ = strconv.ParseInt(h.Get("X-Object-Version"), 10, 64)
	m.Size, _ = strconv.ParseInt(h.Get("X-Object-Size"), 10, 64)
	m.Modified, _ = http.ParseTime(h.Get("Last-Modified"))
	return m
}

func (c *Client) download(ctx context.Context, key string, l objectsapi.Link, h http.Header) (Object, error) {
	resp, err := c.do(ctx, http.MethodGet, l.URL, nil, nil)
	if err != nil {
		return Object{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Object{}, fmt.Errorf("objects API: download %s: bucket answered %s", key, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, l.Size+1))
	if err != nil {
		return Object{}, fmt.Errorf("objects API: download %s: %w", key, err)
	}
	if int64(len(body)) != l.Size || sha256Hex(body) != l.SHA256 {
		return Object{}, fmt.Errorf("objects API: download %s: %d bytes with sha256 %s, want %d and %s", key, len(body), sha256Hex(body), l.Size, l.SHA256)
	}
	m := metaFromHeader(key, h)
	m.Version, m.Size, m.SHA256, m.ContentType = l.Version, l.Size, l.SHA256, l.ContentType
	return Object{Meta: m, Body: body}, nil
}

// ToEnd, as GetRange's n, reads to the end of the document.
const ToEnd = -1

// Part is a range of a document: Body holds bytes [Off, Off+len(Body)) of
// a document of Meta.Size bytes.
type Part struct {
	Meta
	Off  int64
	Body []byte
	// Whole is true when the answer was the whole document (200, not 206):
	// an empty document, which has no byte a range can name. Body is then
	// verified against the document's SHA-256.
	Whole bool
}

// GetRange reads bytes of a version of key (0: the latest) with one Range
// request: n bytes from off (bytes=off-(off+n-1)); with n = ToEnd, from off
// to the end (bytes=off-); with off < 0 and n = ToEnd, the last -off bytes
// (bytes=-(-off)). A range past the end of the document is cut there; one
// that starts past it is a 416 *apigw.Error. The API cuts a range longer than a
// response carries (4 MiB): Part says which bytes came, and the rest is one
// more GetRange away.
//
// The bytes of a range cannot be checked against the document's SHA-256
// (the API verifies what it reads: each chunk, or the whole document);
// GetRange checks that they are the bytes asked for (Content-Range). A
// document served as a presigned download is read from the bucket with the
// same Range.
func (c *Client) GetRange(ctx context.Context, key string, version, off, n int64) (Part, error) {
	spec, err := rangeSpec(off, n)
	if err != nil {
		return Part{}, err
	}
	u := c.path(key)
	if version > 0 {
		u += "?version=" + strconv.FormatInt(version, 10)
	}
	h := http.Header{"Range": {spec}}
	resp, err := c.do(ctx, http.MethodGet, u, nil, h)
	if err != nil {
		return Part{}, err
	}
	meta := metaFromHeader(key, resp.Header)
	if resp.StatusCode == http.StatusSeeOther {
		var l objectsapi.Link
		if err := decode(resp, &l, http.StatusSeeOther); err != nil {
			return Part{}, err
		}
		meta.Version, meta.Size, meta.SHA256, meta.ContentType = l.Version, l.Size, l.SHA256, l.ContentType
		resp, err = c.do(ctx, http.MethodGet, l.URL, nil, h)
		if err != nil {
			return Part{}, err
		}
		if resp.StatusCode != http.StatusPartialContent && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return Part{}, fmt.Errorf("objects API: download %s (%s): bucket answered %s", key, spec, resp.Status)
		}
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		return wholeAsRange(key, meta, resp.Body, off, n)
	default:
		return Part{}, decode(resp, nil)
	}
	start, end, size, err := objectsapi.ParseContentRange(resp.Header.Get("Content-Range"))
	if err != nil {
		return Part{}, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, end-start+1))
	if err != nil {
		return Part{}, fmt.Errorf("objects API: read %s (%s): %w", key, spec, err)
	}
	wantStart := off
	if off < 0 {
		wantStart = max(0, size+off)
	}
	if int64(len(body)) != end-start || start != wantStart || (n > 0 && end > off+n) {
		return Part{}, fmt.Errorf("objects API: %s: asked %s, got %d bytes as %s", key, spec, len(body), resp.Header.Get("Content-Range"))
	}
	meta.Size = size
	return Part{Meta: meta, Off: start, Body: body}, nil
}

// rangeSpec is the Range header of n bytes from off (see GetRange).
func rangeSpec(off, n int64) (string, error) {
	switch {
	case off >= 0 && n > 0:
		return fmt.Sprintf("bytes=%d-%d", off, off+n-1), nil
	case off >= 0 && n == ToEnd:
		return fmt.Sprintf("bytes=%d-", off), nil
	case off < 0 && n == ToEnd:
		return fmt.Sprintf("bytes=-%d", -off), nil
	default:
		return "", fmt.Errorf("objects API: range of %d bytes from %d: want n > 0, or ToEnd (from off, or the last -off bytes)", n, off)
	}
}

// wholeAsRange reads a whole document sent in answer to a range, verifies
// it against its SHA-256, then cuts the range from it.
func wholeAsRange(key string, meta Meta, r io.Reader, off, n int64) (Part, error) {
	body, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return Part{}, fmt.Errorf("objects API: read %s: %w", key, err)
	}
	if got := sha256Hex(body); got != meta.SHA256 {
		return Part{}, fmt.Errorf("objects API: %s: got sha256 %s, the API says %s", key, got, meta.SHA256)
	}
	p := Part{Meta: meta, Body: body, Whole: true}
	if size := int64(len(body)); size > 0 {
		from := off
		switch {
		case off < 0:
			from = max(0, size+off)
		case off >= size:
			return Part{}, fmt.Errorf("objects API: %s: the range starts at %d, the document has %d bytes", key, off, size)
		}
		to := size
		if n > 0 {
			to = min(size, from+n)
		}
		p.Off, p.Body, p.Whole = from, body[from:to], false
	}
	return p, nil
}

// ListOptions shape a listing.
type ListOptions struct {
	// Delimiter, when set, rolls the keys that hold it after the prefix up
	// into common prefixes ("folders").
	Delimiter string
	// PageSize is how many entries a request asks for (default and most:
	// 1,000).
	PageSize int
}

// ListItem is one step of a listing: an object, or (with a delimiter) a
// common prefix.
type ListItem struct {
	Entry  Entry
	Prefix string // set for a common prefix
}

// Entry is one object of a listing.
type Entry = objectsapi.Entry

// ListPage reads one page of the listing under prefix; cursor is the
// previous page's ("" for the first).
func (c *Client) ListPage(ctx context.Context, prefix string, o ListOptions, cursor string) (objectsapi.Listing, error) {
	q := url.Values{"prefix": {prefix}}
	if o.Delimiter != "" {
		q.Set("delimiter", o.Delimiter)
	}
	if o.PageSize != 0 {
		q.Set("limit", strconv.Itoa(o.PageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	// SigV4's canonical form of the query, so that a signer that signs
	// the query as written (curl before 8, botocore) signs what the API
	// computes: sorted, each byte but the unreserved ones percent-encoded,
	// a space as %20 (Encode writes '+' for a space and %2B for a '+').
	resp, err := c.do(ctx, http.MethodGet, c.base+"/objects?"+strings.ReplaceAll(q.Encode(), "+", "%20"), nil, nil)
	if err != nil {
		return objectsapi.Listing{}, err
	}
	var l objectsapi.Listing
	return l, decode(resp, &l)
}

// List iterates over the listing under prefix, page after page, in key
// order: objects and common prefixes merged. It stops at the first error,
// which it yields.
func (c *Client) List(ctx context.Context, prefix string, o ListOptions) iter.Seq2[ListItem, error] {
	return func(yield func(ListItem, error) bool) {
		cursor := ""
		for {
			page, err := c.ListPage(ctx, prefix, o, cursor)
			if err != nil {
				yield(ListItem{}, err)
				return
			}
			es, ps := page.Objects, page.CommonPrefixes
			for len(es) > 0 || len(ps) > 0 {
				var it ListItem
				if len(ps) > 0 && (len(es) == 0 || ps[0] < es[0].Key) {
					it, ps = ListItem{Prefix: ps[0]}, ps[1:]
				} else {
					it, es = ListItem{Entry: es[0]}, es[1:]
				}
				if !yield(it, nil) {
					return
				}
			}
			if page.Cursor == "" {
				return
			}
			cursor = page.Cursor
		}
	}
}

// Versions lists key's versions, newest first.
func (c *Client) Versions(ctx context.Context, key string) ([]Meta, error) {
	resp, err := c.do(ctx, http.MethodGet, c.path(key, objectsapi.QueryVersions), nil, nil)
	if err != nil {
		return nil, err
	}
	var l objectsapi.VersionList
	return l.Versions, decode(resp, &l)
}

// Delete deletes key (only at version ifMatch, if set) and returns the
// version deleted.
func (c *Client) Delete(ctx context.Context, key string, ifMatch *int64) (int64, error) {
	h := http.Header{}
	if ifMatch != nil {
		h.Set("If-Match", strconv.FormatInt(*ifMatch, 10))
	}
	resp, err := c.do(ctx, http.MethodDelete, c.path(key), nil, h)
	if err != nil {
		return 0, err
	}
	var d objectsapi.Deleted
	return d.Version, decode(resp, &d)
}

// ReadModifyWrite reads key, applies change and writes the result based on
// the version read, retrying from the read when another writer got there
// first, up to attempts times. change gets nil for a missing object (the
// write then creates it); it must be safe to call again.
func (c *Client) ReadModifyWrite(ctx context.Context, key string, attempts int, o PutOptions, change func(cur []byte) ([]byte, error)) (Meta, error) {
	var err error
	for range max(attempts, 1) {
		var cur []byte
		base := int64(0)
		obj, gerr := c.Get(ctx, key, 0)
		switch {
		case gerr == nil:
			cur, base = obj.Body, obj.Version
		case !IsNotFound(gerr):
			return Meta{}, gerr
		}
		next, cerr := change(cur)
		if cerr != nil {
			return Meta{}, cerr
		}
		po := o
		if base == 0 {
			po.CreateOnly, po.IfMatch = true, nil
		} else {
			po.IfMatch, po.CreateOnly = &base, false
		}
		if po.ContentType == "" && gerr == nil {
			po.ContentType = obj.ContentType
		}
		var m Meta
		m, err = c.Put(ctx, key, next, po)
		if _, conflict := IsConflict(err); !conflict {
			return m, err
		}
	}
	return Meta{}, fmt.Errorf("objects API: %s: still conflicting after %d attempts: %w", key, max(attempts, 1), err)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
