-- 0011: PLACEHOLDER so this branch (creds) migrates gaplessly; 0011 belongs to the derivedacl branch.
-- Integrator: drop this file when merging, keep derivedacl's 0011 and creds' 0012_api_keys.sql.
SELECT 1;
