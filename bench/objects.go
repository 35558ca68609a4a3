package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/bodies"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// wire counts one client's requests and the bytes they move both ways.
// The bench's own clients are counted, not the proxies: the runner's
// stream pollers and the functions they invoke share those.
type wire struct {
	requests, bytes atomic.Int64
}

func (w *wire) snapshot() (int64, int64) { return w.requests.Load(), w.bytes.Load() }

// counting is an aws.HTTPClient that counts into a wire.
type counting struct {
	base aws.HTTPClient
	w    *wire
}

func (c counting) Do(r *http.Request) (*http.Response, error) {
	c.w.requests.Add(1)
	c.w.bytes.Add(max(r.ContentLength, 0))
	resp, err := c.base.Do(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, w: c.w}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	w *wire
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.bytes.Add(int64(n))
	return n, err
}

// countedConfig is the stack's config with its requests counted into w.
func countedConfig(env *stack.Env, w *wire) aws.Config {
	cfg := env.AWS.Copy()
	base := cfg.HTTPClient
	if base == nil {
		base = awshttp.NewBuildableClient()
	}
	cfg.HTTPClient = counting{base: base, w: w}
	return cfg
}

// objectsPolicy is one way of placing documents.
type objectsPolicy struct {
	label      string
	policy     objects.Policy
	noCompress bool
	keep       bool // keep in the table: what does not fit an item is chunked
}

// alwaysInlineMax is the largest InlineMax a policy may have: an item of
// the longest key and content type still fits 400 KB.
func alwaysInlineMax() int {
	worst := objects.ItemOverhead(string(make([]byte, objects.MaxKeyBytes)), string(make([]byte, objects.MaxContentTypeBytes)))
	return objects.MaxItemBytes - worst
}

func objectsPolicies() []objectsPolicy {
	return []objectsPolicy{
		{label: "our policy", policy: objects.Policy{}},
		{label: "always inline", policy: objects.Policy{InlineMax: alwaysInlineMax()}, noCompress: true, keep: true},
		// InlineMax 0 means the default: 1 byte sends all but empty documents to S3.
		{label: "always S3", policy: objects.Policy{InlineMax: 1}, noCompress: true},
	}
}

type sizeClass struct {
	label string
	body  []byte
	ops   int
}

func sizeClasses(scale float64) []sizeClass {
	n := func(base int) int { return max(2, int(float64(base)*scale)) }
	return []sizeClass{
		{"1 KB text", bodies.Text(1 << 10), n(40)},
		{"9 KB text", bodies.Text(9 << 10), n(40)},
		{"100 KB text", bodies.Text(100 << 10), n(20)},
		{"100 KB random", bodies.Random(100<<10, 1), n(20)},
		{"399 KB random", bodies.Random(399<<10, 2), n(10)},
		{"5 MB random", bodies.Random(5<<20, 3), n(4)},
	}
}

// payloads are the table and bucket adapters the stores share, built once.
type payloads struct {
	items *objectsddb.Store
	blobs *objectss3.Store
}

// countedPayloads are adapters over the stack's objects table and bucket
// whose requests count into ddb and s3w.
func countedPayloads(env *stack.Env, ddb, s3w *wire) payloads {
	return payloads{
		items: objectsddb.New(awsenv.DynamoDB(countedConfig(env, ddb)), env.Vars["OBJECTS_TABLE_NAME"]),
		blobs: objectss3.FromClient(awsenv.S3(countedConfig(env, s3w)), env.Vars["OBJECTS_BUCKET_NAME"]),
	}
}

// store is a domain store over the payloads with the given policy.
func (p payloads) store(pol objects.Policy) *objects.Store {
	return &objects.Store{Items: p.items, Chunks: p.items, Blobs: p.blobs, Policy: pol, MaxVersions: 1000}
}

type opStats struct {
	ddbReq, s3Req, bytes float64 // per operation
	p50                  time.Duration
}

// measure runs op n times and reports per-operation requests and bytes as
// the proxies saw them, and the median latency.
func measure(n int, ddb, s3w *wire, op func(i int) error) (opStats, error) {
	d0, b0 := ddb.snapshot()
	s0, c0 := s3w.snapshot()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if err := op(i); err != nil {
			return opStats{}, err
		}
		lat = append(lat, time.Since(start))
	}
	d1, b1 := ddb.snapshot()
	s1, c1 := s3w.snapshot()
	slices.Sort(lat)
	f := float64(n)
	return opStats{
		ddbReq: float64(d1-d0) / f,
		s3Req:  float64(s1-s0) / f,
		bytes:  float64(b1-b0+c1-c0) / f,
		p50:    lat[len(lat)/2],
	}, nil
}

func benchObjects(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	s := &section{title: "Large objects: placement, chunked reads, multipart uploads"}
	var ddb, s3w wire
	counted := countedPayloads(env, &ddb, &s3w)

	s.printf("Each document is written as a new object (`Store.Put`: payload first, then v0 and v1 in one transaction) and read back\n" +
		"(`Store.Get`, strongly consistent, SHA-256 verified). Requests and bytes (HTTP bodies both ways) are counted by the bench's own clients of DynamoDB Local\n" +
		"and the S3 server, per operation; the cost is the model of `objects.Prices` (us-east-1 on demand: $0.625 per million write units,\n" +
		"$0.125 per million read units, $5 per million S3 PUTs, $0.40 per million GETs), per million operations. \"Always inline\" keeps\n" +
		"every document in the table: inline up to the item limit, chunked beyond it; \"always S3\" puts every document in the bucket.\n\n")
	s.printf("| document | policy | placement | write: DynamoDB + S3 requests | write: bytes on the wire | write p50 | read: requests | read: bytes | read p50 | $ per M writes | $ per M reads |\n")
	s.printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	costW := pngchart.Chart{Title: "modelled $ per million writes + reads (100 KB text document)", Unit: "$"}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for _, c := range sizeClasses(scale) {
		for _, p := range objectsPolicies() {
			store := counted.store(p.policy)
			key := func(i int) string { return fmt.Sprintf("bench/%s/%s/%s/%d", run, slug(p.label), slug(c.label), i) }
			opts := objects.PutOptions{ContentType: "application/octet-stream", NoCompress: p.noCompress, KeepInTable: p.keep}
			var kind objects.Kind
			var codec objects.Codec
			w, err := measure(c.ops, &ddb, &s3w, func(i int) error {
				rec, err := store.Put(ctx, key(i), c.body, opts)
				kind, codec = rec.Kind, rec.Codec
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("put %s (%s): %w", c.label, p.label, err)
			}
			r, err := measure(c.ops, &ddb, &s3w, func(i int) error {
				obj, err := store.Get(ctx, key(i), 0)
				if err == nil && !bytes.Equal(obj.Body, c.body) {
					err = fmt.Errorf("read back %d bytes that differ from the %d written", len(obj.Body), len(c.body))
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("get %s (%s): %w", c.label, p.label, err)
			}
			pl, err := placementOf(p, c.body)
			if err != nil {
				return nil, err
			}
			wc, rc := objects.DefaultPrices.WriteCost(pl)*1e6, objects.DefaultPrices.ReadCost(pl)*1e6
			placement := string(kind)
			if codec != objects.Identity {
				placement += " (" + string(codec) + ")"
			}
			if kind == objects.Chunked {
				placement += fmt.Sprintf(", %d chunks", pl.Chunks)
			}
			s.printf("| %s | %s | %s | %.1f + %.1f | %s | %s | %.1f + %.1f | %s | %s | %.2f | %.2f |\n",
				c.label, p.label, placement, w.ddbReq, w.s3Req, humanBytes(w.bytes), w.p50.Round(100*time.Microsecond),
				r.ddbReq, r.s3Req, humanBytes(r.bytes), r.p50.Round(100*time.Microsecond), wc, rc)
			if c.label == "100 KB text" {
				costW.Bars = append(costW.Bars, pngchart.Bar{Label: p.label, Value: wc + rc})
			}
		}
	}
	s.charts = append(s.charts, costW)

	if err := benchChunkedReads(ctx, env, scale, s); err != nil {
		return nil, err
	}
	if err := benchMultipart(ctx, env, scale, s); err != nil {
		return nil, err
	}
	if err := benchSharedBlobs(ctx, env, scale, s); err != nil {
		return nil, err
	}
	return s, nil
}

// benchSharedBlobs writes the same 5 MiB body under many keys (the first
// alone, then 8 writers at a time), with blobs shared as the functions
// share them, and measures the bytes the bucket stores for them. The first
// goes alone because versitygw answers concurrent conditional PUTs of one
// key with errors rather than 412s (the proxy's 502s).
func benchSharedBlobs(ctx context.Context, env *stack.Env, scale float64, s *section) error {
	var ddb, s3w wire
	p := countedPayloads(env, &ddb, &s3w)
	table := env.Vars["OBJECTS_TABLE_NAME"]
	store := p.store(objects.Policy{})
	store.Shared = objectsddb.NewShared(awsenv.DynamoDB(countedConfig(env, &ddb)), table)
	n := max(10, int(100*scale))
	const size = 5 << 20
	body := bodies.Random(size, uint64(time.Now().UnixNano())) // bytes no earlier run stored
	run := fmt.Sprintf("bench/shared/%d/", time.Now().UnixNano())
	var shared atomic.Int64
	var next atomic.Int64
	d0, _ := ddb.snapshot()
	s0, sb0 := s3w.snapshot()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	if _, err := store.Write(ctx, run+"000", body, objects.PutOptions{NoCompress: true}); err != nil {
		return fmt.Errorf("shared put 0: %w", err)
	}
	next.Store(1)
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && errs[w] == nil; i = int(next.Add(1)) - 1 {
				wr, err := store.Write(ctx, fmt.Sprintf("%s%03d", run, i), body, objects.PutOptions{NoCompress: true})
				if err != nil {
					errs[w] = fmt.Errorf("shared put %d: %w", i, err)
				} else if wr.BlobShared {
					shared.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d1, _ := ddb.snapshot()
	s1, sb1 := s3w.snapshot()
	// The bytes stored: every version of every blob the n keys name.
	blobs := map[string]bool{}
	for i := range n {
		rec, err := store.Stat(ctx, fmt.Sprintf("%s%03d", run, i), 0)
		if err != nil {
			return err
		}
		if rec.Blob == nil {
			return fmt.Errorf("%s%03d is %s, not in S3", run, i, rec.Kind)
		}
		blobs[rec.Blob.Key] = true
	}
	var stored int64
	bucket := objectss3.NewBucket(env.Clients.S3, env.Vars["OBJECTS_BUCKET_NAME"])
	for k := range blobs {
		for page, err := range bucket.Versions(ctx, k) {
			if err != nil {
				return err
			}
			for _, v := range page {
				if v.Key == k && !v.DeleteMarker {
					stored += v.Size
				}
			}
		}
	}
	ratio := float64(stored) / size
	s.printf("\n### The same bytes under many keys\n\n%d PUTs (`Store.Write`, blobs shared as the functions share them) of one 5 MiB random body under %d keys,\n"+
		"the first alone, then 8 writers at a time, in %s: %d of them found the bytes stored and uploaded nothing. The keys name %d blob(s) holding %s:\n"+
		"%.2f × 5 MiB. Goal: S3 bytes stored ≤ 1.05 × 5 MiB: %s. Per PUT, %.1f DynamoDB and %.1f S3 requests, %s sent to S3 (the first\n"+
		"PUT's upload, spread over them all).\n",
		n, n, took.Round(time.Millisecond), shared.Load(), len(blobs), humanBytes(float64(stored)), ratio, verdict(ratio <= 1.05),
		float64(d1-d0)/float64(n), float64(s1-s0)/float64(n), humanBytes(float64(sb1-sb0)/float64(n)))
	return nil
}

// placementOf asks the policy where the body goes, as Store.Put does.
func placementOf(p objectsPolicy, body []byte) (objects.Placement, error) {
	var compressed func() int
	if !p.noCompress {
		compressed = func() int { return objects.CompressedSize(body, len(body)) }
	}
	return p.policy.Place(len(body), compressed, objects.PlaceOptions{Key: "bench/x", ContentType: "application/octet-stream", KeepInTable: p.keep})
}

// benchChunkedReads compares reading a document from chunk items in
// parallel with one S3 GET of the same bytes.
func benchChunkedReads(ctx context.Context, env *stack.Env, scale float64, s *section) error {
	s.printf("\n### Chunked parallel reads against one S3 GET\n\nThe same random document read whole and verified, `Store.Get`, median of %d reads.\n\n", max(3, int(5*scale)))
	s.printf("| document | chunked in the table | one S3 GET | chunked / S3 |\n|---|---:|---:|---:|\n")
	chart := pngchart.Chart{Title: "read throughput, 16 MB document", Unit: "MB/s"}
	reads := max(3, int(5*scale))
	plain := payloads{
		items: objectsddb.New(env.Clients.DynamoDB, env.Vars["OBJECTS_TABLE_NAME"]),
		blobs: objectss3.FromClient(env.Clients.S3, env.Vars["OBJECTS_BUCKET_NAME"]),
	}
	for _, size := range []int{1 << 20, 4 << 20, 16 << 20} {
		body := bodies.Random(size, uint64(size))
		var rates [2]float64
		for i, keep := range []bool{true, false} {
			store := plain.store(objects.Policy{})
			key := fmt.Sprintf("bench/chunked/%d/%d/%t", time.Now().UnixNano(), size, keep)
			if _, err := store.Put(ctx, key, body, objects.PutOptions{KeepInTable: keep, NoCompress: true}); err != nil {
				return fmt.Errorf("put %d bytes (keep in table %t): %w", size, keep, err)
			}
			lat := make([]time.Duration, 0, reads)
			for range reads {
				start := time.Now()
				obj, err := store.Get(ctx, key, 0)
				if err != nil {
					return err
				}
				if len(obj.Body) != size {
					return fmt.Errorf("read %d bytes, want %d", len(obj.Body), size)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			rates[i] = float64(size) / (1 << 20) / lat[len(lat)/2].Seconds()
		}
		s.printf("| %s | %.0f MB/s | %.0f MB/s | %.2f× |\n", humanBytes(float64(size)), rates[0], rates[1], rates[0]/rates[1])
		if size == 16<<20 {
			chart.Bars = append(chart.Bars, pngchart.Bar{Label: "chunked, parallel", Value: rates[0]}, pngchart.Bar{Label: "one S3 GET", Value: rates[1]})
		}
	}
	s.charts = append(s.charts, chart)
	return nil
}

// benchMultipart compares one PutObject with a multipart upload of the same
// bytes, parts sent in parallel.
func benchMultipart(ctx context.Context, env *stack.Env, scale float64, s *section) error {
	size := max(16<<20, int(50*scale)<<20)
	const partSize = 8 << 20
	body := bodies.Random(size, 50)
	bucket := env.Vars["OBJECTS_BUCKET_NAME"]
	client := env.Clients.S3
	s.printf("\n### Multipart upload against one PutObject\n\nA %s random body, to the objects bucket through the S3 proxy; parts of %s.\n\n", humanBytes(float64(size)), humanBytes(partSize))
	s.printf("| upload | time | throughput |\n|---|---:|---:|\n")
	chart := pngchart.Chart{Title: fmt.Sprintf("upload throughput, %s", humanBytes(float64(size))), Unit: "MB/s"}
	report := func(label string, d time.Duration) {
		rate := float64(size) / (1 << 20) / d.Seconds()
		s.printf("| %s | %s | %.0f MB/s |\n", label, d.Round(time.Millisecond), rate)
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: label, Value: rate})
	}
	prefix := fmt.Sprintf("bench/multipart/%d/", time.Now().UnixNano())

	start := time.Now()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "single"), Body: bytes.NewReader(body)}); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	report("one PutObject", time.Since(start))

	for _, parallel := range []int{1, 4} {
		start := time.Now()
		if err := multipartUpload(ctx, client, bucket, fmt.Sprintf("%smultipart-%d", prefix, parallel), body, partSize, parallel); err != nil {
			return err
		}
		report(fmt.Sprintf("multipart, %d in parallel", parallel), time.Since(start))
	}
	s.charts = append(s.charts, chart)
	return nil
}

func multipartUpload(ctx context.Context, client *s3.Client, bucket, key string, body []byte, partSize, parallel int) error {
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", err)
	}
	parts := make([]s3types.CompletedPart, (len(body)+partSize-1)/partSize)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			chunk := body[i*partSize : min(len(body), (i+1)*partSize)]
			out, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(chunk)})
			if err != nil {
				errs[i] = fmt.Errorf("part %d: %w", i+1, err)
				return
			}
			parts[i] = s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			_, _ = client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId})
			return err
		}
	}
	_, err = client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		return fmt.Errorf("complete multipart upload: %w", err)
	}
	return nil
}

func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

func humanBytes(n float64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}
