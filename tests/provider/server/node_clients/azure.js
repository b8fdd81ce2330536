// @azure/identity on an Azure VM: ManagedIdentityCredential with each identity named in argv[3]
// (JSON: name -> the credential's options, null for the system-assigned identity) and, when
// argv[4] is "chain", DefaultAzureCredential; argv[2]: the scope.
'use strict';
const {DefaultAzureCredential, ManagedIdentityCredential} = require('@azure/identity');
const run = require('./run.js');

const scope = process.argv[2];
const token = async (credential) => {
  const got = await credential.getToken(scope);
  return {token: got.token, expires_on: got.expiresOnTimestamp, type: got.tokenType, now: Date.now()};
};
const steps = Object.entries(JSON.parse(process.argv[3])).map(([name, options]) =>
  [name, () => token(options === null ? new ManagedIdentityCredential() : new ManagedIdentityCredential(options))]);
if (process.argv[4] === 'chain') steps.push(['default_chain', () => token(new DefaultAzureCredential())]);
run(steps);
