package searchlambda

import (
	"context"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// SetupIndexer wires the search-indexer function, which keeps the search
// index equal to the objects table from the table's stream.
func SetupIndexer(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("OBJECTS_TABLE")
	bucket := v.String("OBJECTS_BUCKET")
	alias := v.String(searchos.AliasVar)
	if err := v.Err(); err != nil {
		return nil, err
	}
	engine, err := searchos.FromAWS(env.AWS, env.Getenv(searchos.EndpointVar), alias)
	if err != nil {
		return nil, err
	}
	h := &Indexer{
		Indexer: &search.Indexer{
			Index: engine, Target: engine.WriteAlias(), Log: env.Log,
			Payloads: objectslambda.NewReader(env.AWS, table, bucket, env.Log),
		},
		Aliases: engine,
		Log:     env.Log,
		Metrics: lambdafn.NewMetrics(env, "search-indexer"),
	}
	return h.Handle, nil
}
