// Command ferretdb runs FerretDB v1.24 through its embeddable package, for ticklock's tests.
//
// `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` builds, but the binary panics at start
// ("Invalid build/version/version.txt file content"): the module zip carries no version.txt, which only
// the main module's own builds read. Built as our own main module, the embeddable package skips that.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on")
	sqliteURL := flag.String("sqlite-url", "", "SQLite directory URI (the sqlite handler), e.g. file:data/")
	postgresURL := flag.String("postgresql-url", "", "PostgreSQL URL (the postgresql handler)")
	flag.Parse()
	handler := "sqlite"
	if *postgresURL != "" {
		handler = "postgresql"
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:      ferretdb.ListenerConfig{TCP: *listen},
		Logger:        logger,
		Handler:       handler,
		SQLiteURL:     *sqliteURL,
		PostgreSQLURL: *postgresURL,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := f.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}
