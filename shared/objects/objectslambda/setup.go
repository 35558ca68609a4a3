package objectslambda

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchddb"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// objectsConfig is the configuration the objects API and finalizer share.
type objectsConfig struct {
	table, bucket string
	policy        objects.Policy
	maxVersions   int
	indexShards   int
}

// readObjectsConfig reads OBJECTS_TABLE, OBJECTS_BUCKET, INLINE_MAX_BYTES,
// MAX_VERSIONS, MAX_OBJECT_BYTES (optional, default 5 GiB: the largest
// upload; documents sent in a request body have their own, smaller limit)
// and INDEX_SHARDS (optional, default objects.DefaultIndexShards: the
// listing index's write shards).
func readObjectsConfig(env lambdafn.Env, v *lambdafn.Vars) objectsConfig {
	c := objectsConfig{table: v.String("OBJECTS_TABLE"), bucket: v.String("OBJECTS_BUCKET")}
	c.policy.InlineMax = v.Int("INLINE_MAX_BYTES", 0, 350<<10)
	c.maxVersions = v.Int("MAX_VERSIONS", 1, 1000)
	c.policy.MaxSize = int64(optInt(env, v, "MAX_OBJECT_BYTES", 5<<30, 1, 5<<30))
	c.indexShards = optInt(env, v, "INDEX_SHARDS", objects.DefaultIndexShards, 1, objects.MaxIndexShards)
	return c
}

// optInt reads an optional integer variable within [lo, hi].
func optInt(env lambdafn.Env, v *lambdafn.Vars, name string, def, lo, hi int) int {
	if env.Getenv(name) == "" {
		return def
	}
	return v.Int(name, lo, hi)
}

// objectsServices builds the store, the blob adapters and the uploader.
func objectsServices(env lambdafn.Env, c objectsConfig) (*objects.Uploader, *objectss3.Transfers) {
	s3c := awsenv.S3(env.AWS)
	db := awsenv.DynamoDB(env.AWS)
	blobs := objectss3.FromClient(s3c, c.bucket)
	table := objectsddb.New(db, c.table)
	table.IndexShards = c.indexShards
	store := &objects.Store{Items: table, Chunks: table, Blobs: blobs, Shared: objectsddb.NewShared(db, c.table), Policy: c.policy, MaxVersions: c.maxVersions, Log: env.Log}
	transfers := objectss3.TransfersFromClient(s3c, blobs)
	up := &objects.Uploader{Store: store, Uploads: objectsddb.NewUploads(db, c.table), Bucket: transfers, Log: env.Log}
	return up, transfers
}

// SetupAPI wires the objects-api function, which serves /objects/{key+}: documents, versions and presigned
// uploads. Beyond the shared settings: MAX_BODY_BYTES (largest PUT body,
// default 4 MiB), MAX_RESPONSE_BYTES (largest document returned inline,
// default 4 MiB), DOWNLOAD_TTL_SECONDS (presigned downloads, default 300),
// UPLOAD_TTL_SECONDS (time to upload, default 900).
func SetupAPI(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	c := readObjectsConfig(env, v)
	maxBody := optInt(env, v, "MAX_BODY_BYTES", DefaultMaxBody, 0, 4<<20+512<<10)
	maxResp := optInt(env, v, "MAX_RESPONSE_BYTES", DefaultMaxResponse, 0, 4<<20+512<<10)
	linkTTL := optInt(env, v, "DOWNLOAD_TTL_SECONDS", int(DefaultLinkTTL/time.Second), 1, 3600)
	uploadTTL := optInt(env, v, "UPLOAD_TTL_SECONDS", int(objects.DefaultUploadTTL/time.Second), 60, 24*3600)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if err := c.policy.Validate(); err != nil {
		return nil, fmt.Errorf("objects policy: %w", err)
	}
	up, transfers := objectsServices(env, c)
	up.TTL = time.Duration(uploadTTL) * time.Second
	searches, err := searcher(env, c.table)
	if err != nil {
		return nil, err
	}
	h := &HTTP{
		Docs: up.Store, Uploads: up, Links: transfers, Search: searches,
		List:    &objects.Lister{Index: objectsddb.NewIndex(awsenv.DynamoDB(env.AWS), c.table), Shards: c.indexShards},
		MaxBody: maxBody, MaxResponse: int64(maxResp), LinkTTL: time.Duration(linkTTL) * time.Second,
		Metrics: lambdafn.NewMetrics(env, "objects-api"),
		Log:     env.Log,
	}
	return h.Handle, nil
}

// searcher is the API's search, nil when the stack runs without one:
// SEARCH_ENDPOINT (the domain's endpoint) or SEARCH_INDEX empty, as the
// template leaves them with SearchEnabled=false. Locally the endpoint is
// then reached through AWS_ENDPOINT_URL_OPENSEARCH (searchos.FromAWS).
func searcher(env lambdafn.Env, table string) (Searches, error) {
	endpoint, alias := env.Getenv(searchos.EndpointVar), env.Getenv(searchos.AliasVar)
	if endpoint == "" || alias == "" {
		return nil, nil
	}
	engine, err := searchos.FromAWS(env.AWS, endpoint, alias)
	if err != nil {
		return nil, err
	}
	return &search.Searcher{Finder: engine, Latest: searchddb.New(awsenv.DynamoDB(env.AWS), table)}, nil
}

// SetupFinalize wires the objects-finalize function, which turns finished uploads (ObjectCreated under uploads/)
// into verified versions.
func SetupFinalize(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	c := readObjectsConfig(env, v)
	if err := v.Err(); err != nil {
		return nil, err
	}
	up, _ := objectsServices(env, c)
	h := &Finalize{
		Uploads: up,
		Metrics: lambdafn.NewMetrics(env, "objects-finalize"),
		Log:     env.Log,
	}
	return h.Handle, nil
}

// SetupReaper wires the objects-reaper function, which deletes the payloads (blobs, chunk items) of object versions
// removed from the objects table, read from its stream.
func SetupReaper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("OBJECTS_TABLE")
	bucket := v.String("OBJECTS_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	r := &Reaper{
		Reaper:  &objects.Reaper{Store: NewReader(env.AWS, table, bucket, env.Log), Bucket: bucket},
		Log:     env.Log,
		Metrics: lambdafn.NewMetrics(env, "objects-reaper"),
	}
	return r.Handle, nil
}

// NewReader is the objects store as the callers that read or free
// payloads without writing documents build it (the reaper, the search
// indexer, the CLI's reindex): the table's items and chunks, the bucket's
// blobs, the shared blobs' records, no write policy.
func NewReader(cfg aws.Config, table, bucket string, log *slog.Logger) *objects.Store {
	db := awsenv.DynamoDB(cfg)
	items := objectsddb.New(db, table)
	return &objects.Store{Items: items, Chunks: items, Blobs: objectss3.New(awsenv.S3(cfg), nil, bucket),
		Shared: objectsddb.NewShared(db, table), Log: log}
}

// SetupSweeper wires the objects-sweeper function, which removes orphan payloads: blobs and chunk items that no
// reference names, older than the grace period.
func SetupSweeper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("OBJECTS_TABLE")
	bucket := v.String("OBJECTS_BUCKET")
	grace := v.Int("ORPHAN_GRACE_MINUTES", 1, 1<<20)
	if err := v.Err(); err != nil {
		return nil, err
	}
	s := &Sweeper{
		Sweeper: NewSweeper(awsenv.DynamoDB(env.AWS), awsenv.S3(env.AWS), table, bucket, time.Duration(grace)*time.Minute, time.Now, env.Log),
		Log:     env.Log,
		Metrics: lambdafn.NewMetrics(env, "objects-sweeper"),
	}
	return s.Handle, nil
}

// NewSweeper is the orphan sweeper over the objects table and bucket, as
// the objects-sweeper function runs it: its clock is now, and shared
// blobs are released through the table's records.
func NewSweeper(db *dynamodb.Client, s3c *s3.Client, table, bucket string, grace time.Duration, now func() time.Time, log *slog.Logger) *objects.Sweeper {
	return &objects.Sweeper{
		Table: objectsddb.NewRefs(db, table),
		Blobs: objectss3.NewBucket(s3c, bucket),
		Shared: &objects.Store{
			Blobs: objectss3.New(s3c, nil, bucket), Shared: objectsddb.NewShared(db, table), Now: now, Log: log,
		},
		Grace: grace,
		Now:   now,
		Log:   log,
	}
}
