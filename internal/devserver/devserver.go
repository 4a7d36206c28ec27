// Package devserver is the in-memory Redis-compatible server behind `jobs dev`
// (github.com/alicebob/miniredis), so a newcomer can run the whole system with nothing
// installed. Nothing it holds survives the process: it is for trying things, never for
// jobs that matter. Its test runs the lifecycle scripts on it, so they stay compatible.
package devserver

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// Server is a running in-memory server.
type Server struct {
	mr *miniredis.Miniredis
}

// Start listens on addr ("127.0.0.1:0" picks a free port).
func Start(addr string) (*Server, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("in-memory Redis cannot listen on %s: %w", addr, err)
	}
	return &Server{mr: mr}, nil
}

// Addr returns the host:port it listens on.
func (s *Server) Addr() string { return s.mr.Addr() }

// Close stops the server; everything in it is gone.
func (s *Server) Close() { s.mr.Close() }
