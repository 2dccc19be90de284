package main

import (
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// openStack opens an embedded stack with cfg on interface ifname, inside
// namespace ns (cfg.Interface is set to ifname).
func openStack(ns *testbed.Namespace, ifname string, cfg sockapi.Config) (s *sockapi.Stack, err error) {
	cfg.Interface = ifname
	err = ns.Do(func() (err error) {
		s, err = sockapi.Open(cfg)
		return err
	})
	return s, err
}
