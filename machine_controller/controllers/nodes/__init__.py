"""Nodes: nodelink (Node <-> Machine), providerIDs and the deletion of a gone instance's Node (lifecycle), what a
Node's status says (status), and a Node's volumes once its VM is off (storage)."""
