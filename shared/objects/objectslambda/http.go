package objectslambda

import (
	"context"
	"log/slog"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/search"
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

// Searches answers searches of the objects; *search.Searcher satisfies it.
type Searches interface {
	Search(ctx context.Context, q search.Query) (search.Page, error)
}

// Links presigns downloads; *objectss3.Transfers satisfies it.
type Links interface {
	PresignGet(ctx context.Context, ref objects.BlobRef, ttl time.Duration) (objects.SignedRequest, error)
}

var (
	_ Documents = (*objects.Store)(nil)
	_ Uploads   = (*objects.Uploader)(nil)
	_ Listings  = (*objects.Lister)(nil)
	_ Searches  = (*search.Searcher)(nil)
)

// HTTP serves /objects (listings) and /objects/{key+}.
type HTTP struct {
	Docs    Documents
	Uploads Uploads
	List    Listings
	Links   Links
	// Search answers GET /objects?search=…; nil when the stack runs
	// without search (503 search-disabled).
	Search Searches
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

func (h *HTTP) maxBody() int {
	if h.MaxBody <= 0 {
		return DefaultMaxBody
	}
	return h.MaxBody
}

func (h *HTTP) maxResponse() int64 {
	if h.MaxResponse <= 0 {
		return DefaultMaxResponse
	}
	return h.MaxResponse
}

func (h *HTTP) linkTTL() time.Duration {
	if h.LinkTTL <= 0 {
		return DefaultLinkTTL
	}
	return h.LinkTTL
}

func (h *HTTP) emit(ms ...emf.Metric) {
	if h.Metrics == nil {
		return
	}
	if err := h.Metrics.Emit(ms, nil); err != nil {
		h.Log.Warn("metrics not written", "err", err)
	}
}
