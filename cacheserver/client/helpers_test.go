package client

import "github.com/burstcache/burstcache/cacheserver/namespace"

func namespaceSize(size int64) namespace.SetAttr { return namespace.SetAttr{Size: &size} }
