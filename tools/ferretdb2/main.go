// Command ferretdb2 runs FerretDB v2.5 through its embeddable package, for ticklock's tests and benchmark.
//
// FerretDB 2 is a MongoDB wire-protocol front end over PostgreSQL with the DocumentDB extension (which
// tools/documentdb builds): documents are stored as BSON and served by real indexes, where FerretDB 1.24
// decodes JSONB in Go and serves no filter from an index. Built as our own main module, like
// tools/ferretdb, so that the module zip's missing build files do not matter; telemetry off, warnings
// and errors to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/v2/ferretdb"
)

func main() {
	listen := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on")
	postgresURL := flag.String("postgresql-url", "", "PostgreSQL URL of a database with the documentdb extension")
	stateDir := flag.String("state-dir", "", "a writable directory for FerretDB's state file")
	flag.Parse()
	if *postgresURL == "" || *stateDir == "" {
		fmt.Fprintln(os.Stderr, "ferretdb2: --postgresql-url and --state-dir are required")
		os.Exit(2)
	}
	telemetry := false
	f, err := ferretdb.New(&ferretdb.Config{
		PostgreSQLURL: *postgresURL,
		ListenAddr:    *listen,
		StateDir:      *stateDir,
		LogLevel:      slog.LevelWarn,
		LogOutput:     os.Stderr,
		Telemetry:     &telemetry,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb2:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	f.Run(ctx)
}
