"""Authorization: Kafka's ACL model (:mod:`.acl`), the authorizer that decides with Kafka's
``StandardAuthorizer`` rules (:mod:`.authorizer`) and a lone broker's ACL file
(:mod:`.acl_file`). Loads nothing of the server or the cluster layer: the server's handlers
and the cluster's ZooKeeper ACL store call it."""
