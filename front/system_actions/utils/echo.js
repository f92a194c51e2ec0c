// Returns its parameters: the identity of sequences and a quick check of a deployment.
function main(params) {
  return params;
}
