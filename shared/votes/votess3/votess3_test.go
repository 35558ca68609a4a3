package votess3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsstub"
)

// bucket is an in-memory bucket behind an S3 client (awsstub): objects by
// key, and the calls made.
type bucket struct {
	objects map[string]string
	calls   []string
	err     error
}

func (b *bucket) client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", APIOptions: []func(*middleware.Stack) error{awsstub.Answer(b.answer)}})
}

func (b *bucket) answer(in any) (any, error) {
	switch in := in.(type) {
	case *s3.ListObjectsV2Input:
		b.calls = append(b.calls, "ListObjectsV2 "+aws.ToString(in.Prefix))
		if b.err != nil {
			return nil, b.err
		}
		out := &s3.ListObjectsV2Output{}
		for k := range b.objects {
			if strings.HasPrefix(k, aws.ToString(in.Prefix)) {
				out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k)})
			}
		}
		return out, nil
	case *s3.GetObjectInput:
		b.calls = append(b.calls, "GetObject "+aws.ToString(in.Key))
		body, ok := b.objects[aws.ToString(in.Key)]
		if !ok {
			return nil, &s3types.NoSuchKey{}
		}
		return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(body))}, nil
	}
	return nil, fmt.Errorf("bucket: unexpected %T", in)
}

func TestRetired(t *testing.T) {
	const key = "table=ddbpipe-votes/month=2026-11/_manifest.json"
	at := time.Date(2026, 12, 3, 2, 0, 8, 0, time.UTC)
	for _, tt := range []struct {
		name     string
		b        *bucket
		retired  bool
		err      bool
		getCalls int
	}{
		{"never retired: one list", &bucket{objects: map[string]string{"table=ddbpipe-votes/month=2026-11/a.parquet": "x"}}, false, false, 0},
		{"retired", &bucket{objects: map[string]string{key: `{"month":"2026-11","verification":{"at":"2026-12-03T02:00:08Z","ok":true}}`}}, true, false, 1},
		{"verification failed", &bucket{objects: map[string]string{key: `{"verification":{"at":"2026-12-03T02:00:08Z","ok":false}}`}}, false, false, 1},
		{"a key that only starts like it", &bucket{objects: map[string]string{key + ".bak": `{"verification":{"ok":true}}`}}, false, false, 0},
		{"unreadable manifest", &bucket{objects: map[string]string{key: `{`}}, false, true, 1},
		{"list refused", &bucket{err: errors.New("AccessDenied")}, false, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Retirements{S3: tt.b.client(), Bucket: "archive", Table: "ddbpipe-votes"}
			got, retired, err := r.Retired(context.Background(), "2026-11")
			if retired != tt.retired || (err != nil) != tt.err || retired && !got.Equal(at) {
				t.Errorf("Retired = %s, %v, %v; want retired %v, error %v", got, retired, err, tt.retired, tt.err)
			}
			gets := 0
			for _, c := range tt.b.calls {
				if strings.HasPrefix(c, "GetObject") {
					gets++
				}
			}
			if gets != tt.getCalls || len(tt.b.calls) == 0 || tt.b.calls[0] != "ListObjectsV2 "+key {
				t.Errorf("calls %q: want a list of %s first, then %d reads", tt.b.calls, key, tt.getCalls)
			}
		})
	}
}
