-- 0015: reserved for another branch of this round (migrations are gapless; 0016 is issue 25 §4's). This file is
-- a no-op so that the speed branch migrates on its own: drop it at merge when the real 0015 lands.
SELECT 1;
