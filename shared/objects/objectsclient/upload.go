package objectsclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// UploadOptions describe a presigned upload.
type UploadOptions struct {
	ContentType string
	IfMatch     *int64 // commit only if this is the latest version then (0: create only)
	// SHA256 is the document's digest in hex; computed from the reader
	// when empty (one extra pass).
	SHA256 string
}

// UploadError is an upload that the finalizer refused.
type UploadError struct{ Status UploadStatus }

func (e *UploadError) Error() string {
	return fmt.Sprintf("objects API: upload %s of %s failed (%s): %s", e.Status.ID, e.Status.Key, e.Status.Reason, e.Status.Message)
}

// Upload stores a document of size bytes read from r through a presigned
// upload: one PUT, or parts sent PartConcurrency at a time; then it waits
// until the finalizer committed it (the status with its version) or
// refused it (an *UploadError).
func (c *Client) Upload(ctx context.Context, key string, r io.ReaderAt, size int64, o UploadOptions) (UploadStatus, error) {
	if o.SHA256 == "" {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
			return UploadStatus{}, fmt.Errorf("objects API: hash %s: %w", key, err)
		}
		o.SHA256 = fmt.Sprintf("%x", h.Sum(nil))
	}
	g, err := c.BeginUpload(ctx, key, size, o)
	if err != nil {
		return UploadStatus{}, err
	}
	if g.Put != nil {
		if _, err := c.send(ctx, *g.Put, io.NewSectionReader(r, 0, size), size); err != nil {
			return g.UploadStatus, err
		}
	} else if err := c.sendParts(ctx, g, r, size); err != nil {
		return g.UploadStatus, err
	}
	return c.Wait(ctx, key, g.ID)
}

// BeginUpload asks for a presigned upload.
func (c *Client) BeginUpload(ctx context.Context, key string, size int64, o UploadOptions) (objectsapi.Granted, error) {
	in, _ := json.Marshal(objectsapi.UploadRequest{Size: &size, SHA256: o.SHA256, ContentType: o.ContentType, IfMatch: o.IfMatch})
	resp, err := c.do(ctx, http.MethodPost, c.path(key, objectsapi.QueryUploads), bytes.NewReader(in), http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return objectsapi.Granted{}, err
	}
	var g objectsapi.Granted
	return g, decode(resp, &g)
}

// send makes a presigned request with its signed headers and returns the
// ETag the bucket answered.
func (c *Client) send(ctx context.Context, s objectsapi.SignedRequest, body io.Reader, n int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, s.Method, s.URL, body)
	if err != nil {
		return "", err
	}
	for k, v := range s.Header {
		if !strings.EqualFold(k, "Content-Length") {
			req.Header[k] = v
		}
	}
	req.ContentLength = n
	if n == 0 {
		req.Body = http.NoBody
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("objects API: upload: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("objects API: upload: the bucket answered %s: %s", resp.Status, apigw.Clip(string(msg), 300))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("ETag"), nil
}

func (c *Client) sendParts(ctx context.Context, g objectsapi.Granted, r io.ReaderAt, size int64) error {
	mp := g.Multipart
	if mp == nil || len(mp.Parts) == 0 {
		return errors.New("objects API: the grant has neither a PUT nor parts")
	}
	parts := make([]objectsapi.Part, len(mp.Parts))
	errs := make([]error, len(mp.Parts))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, max(c.PartConcurrency, 1))
	if c.PartConcurrency <= 0 {
		slots = make(chan struct{}, 4)
	}
	var wg sync.WaitGroup
	for i, p := range mp.Parts {
		off := int64(i) * mp.PartSize
		n := min(mp.PartSize, size-off)
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			etag, err := c.send(ctx, p, io.NewSectionReader(r, off, n), n)
			if err != nil {
				errs[i] = fmt.Errorf("part %d: %w", i+1, err)
				cancel()
				return
			}
			parts[i] = objectsapi.Part{Number: int32(i + 1), ETag: etag}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	in, _ := json.Marshal(objectsapi.CompleteRequest{Parts: parts})
	resp, err := c.do(ctx, http.MethodPost, c.base+mp.Complete, bytes.NewReader(in), http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	return decode(resp, nil)
}

// UploadStatus returns an upload's state.
func (c *Client) UploadStatus(ctx context.Context, key, id string) (UploadStatus, error) {
	resp, err := c.do(ctx, http.MethodGet, c.base+objectsapi.UploadPath(key, id), nil, nil)
	if err != nil {
		return UploadStatus{}, err
	}
	var s UploadStatus
	return s, decode(resp, &s)
}

// Wait polls an upload until it is settled or ctx ends. A failed upload
// is an *UploadError.
func (c *Client) Wait(ctx context.Context, key, id string) (UploadStatus, error) {
	every := c.Poll
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	for {
		s, err := c.UploadStatus(ctx, key, id)
		if err != nil {
			return s, err
		}
		switch s.State {
		case objectsapi.StateCommitted:
			return s, nil
		case objectsapi.StateFailed:
			return s, &UploadError{Status: s}
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("objects API: upload %s still %s: %w", id, s.State, ctx.Err())
		case <-time.After(every):
		}
	}
}
