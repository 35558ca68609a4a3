// Package votess3 is the votes flow's S3 adapter: the rotator's record of
// the ledger months it retired, read from the archive bucket.
package votess3

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

var _ votes.Retirements = (*Retirements)(nil)

// Retirements reads whether a ledger month was retired from its archive
// manifest (ledger.ManifestKey, ledger.Retired). It lists the key before
// reading it, so a month never retired costs one list, and a role needs
// s3:ListBucket on the bucket and s3:GetObject on the manifests only (a
// GetObject of a missing key without ListBucket is refused, not a 404).
type Retirements struct {
	S3     *s3.Client
	Bucket string
	// Table is the ledger's archive table: the ledger tables' prefix
	// (<stack>-votes).
	Table string
}

// Retired reports whether month m was retired, and when its archive was
// verified.
func (r *Retirements) Retired(ctx context.Context, m string) (time.Time, bool, error) {
	key := ledger.ManifestKey(r.Table, m)
	list, err := r.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(key), MaxKeys: aws.Int32(1)})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("votess3: list s3://%s/%s: %w", r.Bucket, key, err)
	}
	if len(list.Contents) == 0 || aws.ToString(list.Contents[0].Key) != key {
		return time.Time{}, false, nil
	}
	out, err := r.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("votess3: get s3://%s/%s: %w", r.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("votess3: read s3://%s/%s: %w", r.Bucket, key, err)
	}
	at, retired, err := ledger.Retired(b)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("votess3: s3://%s/%s: %w", r.Bucket, key, err)
	}
	return at, retired, nil
}
